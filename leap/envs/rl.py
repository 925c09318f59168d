"""Reinforcement learning on ``LeapLayerSearchCost-v0`` with Stable-Baselines3, against leap's own agents.

PPO (Schulman et al., 2017) from Stable-Baselines3 (``pip install leap[rl]``; a well-kept
implementation, so leap does not carry its own) learns a policy mapping an episode's observation
(per-layer redundancy metrics, zones, acceptance so far) to one action per decision unit. The
action mask is not needed by the learner: an illegal unit action executes the layer and is counted
(``info["illegal_actions"]``), so plain PPO over the ``MultiDiscrete`` space is well defined.

:func:`compare_policies` then runs the learned policy, uniformly random legal actions and LEAP's
zone-aware MCTS (its ``ask``/``record`` driven step by step through the same environment, via
:meth:`~leap.envs.layer_search.LeapLayerSearchEnv.action_of`) on *held-out* prompts - never the ones
PPO trained on - and reports each one's mean reward per step (the calibrated cost model's predicted
speedup of the step: deterministic, so the comparison is not timing noise) and whether every episode
decoded plain decoding's tokens.

Who calls what: ``python -m leap.envs.rl`` (docs/agents.md) and ``tests/envs/test_rl.py`` (short form).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["PolicyResult", "PromptSubset", "train_ppo", "compare_policies", "main"]


@dataclass
class PolicyResult:
    policy: str
    prompts: int
    steps: int
    mean_reward: float  # mean over steps of the cost model's predicted speedup
    mean_committed: float  # tokens per step
    lossless: bool  # every episode's tokens equal plain decoding's


def _require_sb3():
    import importlib.util

    if importlib.util.find_spec("stable_baselines3") is None:  # a clear error that names the fix
        raise ImportError("leap's RL example needs Stable-Baselines3: pip install 'leap[rl]' "
                          "(or pip install stable-baselines3)")


def train_ppo(env, total_timesteps: int, *, seed: int = 0, n_steps: int = 128, batch_size: int = 64,
              verbose: int = 0):
    """PPO with a multi-input MLP policy on ``env``: one ``LeapLayerSearchCost-v0`` instance, or a list of them
    (several environments, stepped together by Stable-Baselines3's ``DummyVecEnv``; ``n_steps`` per
    environment, so each update sees ``n_steps x len(env)`` steps)."""
    _require_sb3()
    from stable_baselines3 import PPO

    if isinstance(env, (list, tuple)):
        from stable_baselines3.common.vec_env import DummyVecEnv

        spaces_ = {repr(e.action_space) for e in env}
        if len(spaces_) > 1:
            raise ValueError(f"the environments' action spaces differ ({spaces_}); build them on one model and "
                             "prompt set so their zones and groups agree")
        env = DummyVecEnv([lambda e=e: e for e in env])
    model = PPO("MultiInputPolicy", env, n_steps=n_steps, batch_size=batch_size, seed=seed, verbose=verbose,
                device="cpu")
    return model.learn(total_timesteps=total_timesteps)


class _Policy:
    """What :func:`_episode` drives: ``begin`` at a reset, ``act`` each step, ``observe`` its reward."""

    def begin(self, env) -> None:
        pass

    def act(self, env, obs, info):
        raise NotImplementedError

    def observe(self, reward: float) -> None:
        pass


class _Random(_Policy):
    """Uniformly random legal actions."""

    def __init__(self, rng):
        self.rng = rng

    def act(self, env, obs, info):
        return np.array([self.rng.choice(np.flatnonzero(m)) for m in info["action_mask"]])


class _Agent(_Policy):
    """A leap search agent (fresh per prompt, on the environment's space) proposing every step."""

    def __init__(self, name: str, seed: int):
        self.name, self.seed = name, seed

    def begin(self, env) -> None:
        from leap.search.base import make_agent
        from leap.search.history import SearchHistory

        self.agent, self.history = make_agent(self.name, env.space, seed=self.seed), SearchHistory()

    def act(self, env, obs, info):
        self.config = self.agent.ask(self.history)
        return env.action_of(self.config)

    def observe(self, reward: float) -> None:
        self.history.record(self.config, reward)
        self.agent.record(self.config, reward, self.history)


class _Learned(_Policy):
    """A trained Stable-Baselines3 model, acting deterministically."""

    def __init__(self, model):
        self.model = model

    def act(self, env, obs, info):
        return self.model.predict(obs, deterministic=True)[0]


def _episode(env, index: int, policy) -> tuple[list[float], list[int], bool]:
    """One episode on prompt ``index``: its rewards, committed tokens per step, and token identity with
    plain decoding of the same prompt and length."""
    from leap.core.decoding.decoder import SelfSpecDecoder

    obs, info = env.reset(options={"prompt_index": index})
    policy.begin(env)
    rewards, committed, done = [], [], env.session.done
    while not done:
        obs, reward, terminated, truncated, info = env.step(policy.act(env, obs, info))
        policy.observe(float(reward))
        rewards.append(float(reward))
        committed.append(int(info["committed"]))
        done = terminated or truncated
    session = env.session
    plain = SelfSpecDecoder(env.model, None).generate(session.tokens[: session.prompt_len],
                                                      max_new_tokens=len(session.new_token_ids))
    return rewards, committed, plain.token_ids == session.new_token_ids


def compare_policies(env, held_out: Sequence[int], policies: dict[str, Any], *, seed: int = 0) -> list[PolicyResult]:
    """Each policy on every held-out prompt index of ``env``. A policy is ``"random"``, the name of a
    registered search agent (``"mcts"``: LEAP's) or a trained SB3 model."""
    results = []
    for name, spec in policies.items():
        if spec == "random":
            policy = _Random(np.random.default_rng(seed))
        elif isinstance(spec, str):
            policy = _Agent(spec, seed)
        else:
            policy = _Learned(spec)
        rewards: list[float] = []
        committed: list[int] = []
        lossless = True
        for index in held_out:
            r, c, same = _episode(env, index, policy)
            rewards += r
            committed += c
            lossless &= same
        results.append(PolicyResult(name, len(held_out), len(rewards), statistics.mean(rewards) if rewards else 0.0,
                                    statistics.mean(committed) if committed else 0.0, lossless))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Train PPO on training prompts, compare with random and MCTS on held-out ones, print JSON."""
    from leap.data import load_prompts
    from leap.envs import register_envs

    register_envs()

    ap = argparse.ArgumentParser(prog="python -m leap.envs.rl", description=main.__doc__)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--timesteps", type=int, default=2048)
    ap.add_argument("--train-prompts", type=int, default=26, help="training questions (2 per category, from "
                    "the end of each category's list: disjoint from the first questions the benchmarks use)")
    ap.add_argument("--eval-per-category", type=int, default=1, help="held-out questions per category (the first)")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--step-budget", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-envs", type=int, default=1, help="environments PPO steps together (DummyVecEnv); they "
                    "share one copy of the model, each with its own decoding session")
    args = ap.parse_args(argv)
    rows = load_prompts()
    by_cat: dict[str, list[dict]] = {}
    for row in rows:
        by_cat.setdefault(row["category"], []).append(row)
    held = [r for rs in by_cat.values() for r in rs[: args.eval_per_category]]
    per_cat = max(1, args.train_prompts // len(by_cat))
    train = [r for rs in by_cat.values() for r in rs[-per_cat:]]
    assert not {r["question_id"] for r in held} & {r["question_id"] for r in train}, "train and eval overlap"
    prompts = [r["turns"][0] for r in train + held]
    env = gym.make("LeapLayerSearchCost-v0", model=args.model, prompts=prompts, max_new_tokens=args.max_new_tokens,
                   step_budget=args.step_budget, disable_env_checker=True).unwrapped
    copies = [env] + [gym.make("LeapLayerSearchCost-v0", model=env.model, prompts=prompts,
                               max_new_tokens=args.max_new_tokens, step_budget=args.step_budget,
                               disable_env_checker=True).unwrapped for _ in range(args.n_envs - 1)]
    train_envs = [gym.wrappers.TimeLimit(PromptSubset(e, range(len(train))), args.step_budget) for e in copies]
    ppo = train_ppo(train_envs if args.n_envs > 1 else train_envs[0], args.timesteps, seed=args.seed)
    held_idx = list(range(len(train), len(train) + len(held)))
    results = compare_policies(env, held_idx, {"ppo": ppo, "random": "random", "mcts": "mcts"}, seed=args.seed)
    from leap.core.runtime.provenance import provenance

    print(json.dumps({"provenance": provenance(env.model), "train_prompts": len(train), "held_out_prompts": len(held), "timesteps": args.timesteps,
                      "results": [asdict(r) for r in results]}, indent=1))
    return 0


class PromptSubset(gym.Wrapper):
    """An environment whose resets draw only from the given prompt indices (the training prompts)."""

    def __init__(self, env, indices: Sequence[int]) -> None:
        super().__init__(env)
        self.indices = list(indices)

    def reset(self, *, seed=None, options=None):
        if not options or "prompt_index" not in options:
            pick = int(self.np_random.integers(len(self.indices)))
            options = {**(options or {}), "prompt_index": self.indices[pick]}
        return self.env.reset(seed=seed, options=options)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
