"""``LeapLayerSearch-v0``: layer-configuration search as a Gymnasium environment.

One episode = one prompt; one step = one real draft/verify iteration of the self-speculative decoder
under the configuration the action encodes; reward = that step's speedup over plain decoding.

* **Action**: ``MultiDiscrete([3] * units)``, one of EXECUTE (0), SKIP (1), REPEAT (2) per decision
  unit (``low_bit=True``: ``[4] * units``, with LOW (3), the layer run at low precision). The zones
  decide which are legal; ``info["action_mask"]`` (``[units, 3 or 4]``) says so, and an illegal action is
  replaced by EXECUTE (``info["illegal_actions"]`` counts them).
* **Observation** (``Dict``): ``metrics`` ``[L, M]`` - the registered redundancy metrics of this
  episode's prompt from its prefill; ``zones`` ``[L]`` - 0 early, 1 middle, 2 final; ``acceptance``
  ``[3]`` - mean committed tokens per step, draft acceptance rate and fraction of the token budget
  used, over the episode so far.
* **Termination**: ``terminated`` at EOS or ``max_new_tokens``; ``truncated`` when ``step_budget``
  steps have been taken.

The zones and groups (hence the action space) are computed once, at construction, from the first
``calibration_prompts`` prompts, and stay fixed: an action space cannot change shape between episodes.
Each episode's observation still carries its own prompt's metrics.

Rewards: ``reward="measured"`` (wall clock; registered as ``LeapLayerSearch-v0`` with
``nondeterministic=True``), or ``reward="cost"`` (the deterministic cost model of
:mod:`leap.search.reward`; registered as ``LeapLayerSearchCost-v0``, passes ``check_env``'s
determinism checks). Bump the ``-vN`` suffix whenever the meaning of an observation or reward changes.

Constructor: ``model`` (a name/path for :func:`leap.core.modeling.model.load_model`, loaded on ``device`` in
``dtype``, or a ``LeapModel`` already loaded - several environments can share one),
``prompts`` (a JSONL file, a list of strings or of token-id lists; default: the shipped Spec-Bench
prompts), ``max_new_tokens``, ``reward``, ``step_budget``, ``zones``/``groups`` (ablations), ``chat``,
``low_bit`` (the per-layer precision action in the middle and final zones; ``low_bits`` 8 or 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from leap.core.config import LayerAction
from leap.redundancy.zones import Zone

__all__ = ["LeapLayerSearchEnv"]

_CANONICAL = (LayerAction.EXECUTE, LayerAction.SKIP, LayerAction.REPEAT, LayerAction.LOW)
_ZONE_CODE = {Zone.EARLY: 0, Zone.MIDDLE: 1, Zone.FINAL: 2}


def _prompt_list(prompts: str | Sequence | None) -> list:
    from leap.data import load_prompts

    if prompts is None or isinstance(prompts, str):
        return [row["turns"][0] for row in load_prompts(prompts)]
    out = list(prompts)
    if not out:
        from leap.core.errors import SettingsError

        raise SettingsError("prompts is empty; give a JSONL file or a non-empty list")
    return out


class LeapLayerSearchEnv(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        model: Any = "smollm2",
        prompts: str | Sequence | None = None,
        max_new_tokens: int = 64,
        reward: str = "measured",
        seed: int | None = None,
        step_budget: int = 40,
        zones: bool = True,
        groups: bool = True,
        chat: bool = True,
        calibration_prompts: int = 4,
        positions: int = 8,
        device: str = "auto",
        dtype: str | None = None,
        low_bit: bool = False,
        low_bits: int = 8,
    ) -> None:
        from leap.core.decoding.decoder import SelfSpecDecoder
        from leap.core.modeling.model import LeapModel, load_model
        from leap.redundancy.base import compute_metrics
        from leap.search.reward import make_reward
        from leap.redundancy.build import build_space

        # a LeapModel passed in is used as it is (several environments can share one); a name or path is
        # loaded here, on ``device`` in ``dtype`` (defaults: CUDA if available, float32 on CPU / bfloat16 on GPU)
        self.model = model if isinstance(model, LeapModel) else load_model(model, device=device, dtype=dtype)
        self.prompts = _prompt_list(prompts)
        self.max_new_tokens, self.step_budget = int(max_new_tokens), int(step_budget)
        self.reward_kind = reward
        self.chat = chat and bool(getattr(self.model.tokenizer, "chat_template", None))
        self.positions = positions
        self.decoder = SelfSpecDecoder(self.model, None, low_bits=low_bits)
        #: the action codes: EXECUTE, SKIP, REPEAT (and LOW with ``low_bit``)
        self.canonical = _CANONICAL if low_bit else _CANONICAL[:3]
        # the cost model reads the machine's calibration (measured once per model/device, then cached)
        self.reward_fn = make_reward("cost", costs=self.decoder.costs) if reward == "cost" else make_reward(reward)
        self._compute_metrics = compute_metrics

        traces = [self._start(p, 1).trace for p in self.prompts[:calibration_prompts]]
        self.space = build_space(traces, zones=zones, groups=groups, metrics=None, low_bit=low_bit)
        self.metric_names = sorted(self.space.metrics)
        L, M, U = self.model.num_layers, len(self.metric_names), len(self.space.units)
        self.action_space = spaces.MultiDiscrete([len(self.canonical)] * U)
        self.observation_space = spaces.Dict({
            "metrics": spaces.Box(-1e6, 1e6, shape=(L, M), dtype=np.float32),
            "zones": spaces.MultiDiscrete([3] * L),
            "acceptance": spaces.Box(0.0, 1e6, shape=(3,), dtype=np.float32),
        })
        self._mask = np.array([[a in u.actions for a in self.canonical] for u in self.space.units], dtype=np.int8)
        self._zones = np.array([_ZONE_CODE[z] for z in self.space.zones], dtype=np.int64)
        self.session = None
        self.t_base = 0.0
        if seed is not None:
            self.reset(seed=seed)

    # ------------------------------------------------------------------ helpers
    def _start(self, prompt, max_new_tokens: int):
        ids = self.model.encode(prompt, chat=self.chat) if isinstance(prompt, str) else list(prompt)
        return self.decoder.start(ids, max_new_tokens=max_new_tokens, trace_positions=self.positions)

    def _obs(self) -> dict[str, np.ndarray]:
        steps = self.session.steps
        committed = sum(s.committed for s in steps)
        drafted = sum(s.drafted for s in steps)
        accepted = sum(s.accepted for s in steps)
        acceptance = np.array([committed / len(steps) if steps else 0.0, accepted / drafted if drafted else 0.0,
                               len(self.session.new_token_ids) / self.max_new_tokens], dtype=np.float32)
        return {"metrics": self._metrics.copy(), "zones": self._zones.copy(), "acceptance": acceptance}

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"action_mask": self._mask.copy(), "prompt_index": self._index, **extra}

    def config_of(self, action: Sequence[int]):
        """The :class:`LayerConfig` an action encodes, and how many unit actions were illegal."""
        choice, illegal = [], 0
        for unit, a in zip(self.space.units, np.asarray(action, dtype=np.int64)):
            wanted = self.canonical[int(a)]
            if wanted in unit.actions:
                choice.append(unit.actions.index(wanted))
            else:
                choice.append(0)
                illegal += 1
        if not self.space.is_valid(choice):
            choice = list(self.space.full_choice)
        return self.space.to_config(choice), illegal

    def action_of(self, config) -> np.ndarray:
        """The action that encodes ``config`` (None: plain decoding), the inverse of :meth:`config_of`
        for configurations inside :attr:`space` - how a search agent's proposal becomes an action."""
        choice = self.space.full_choice if config is None else self.space.from_config(config)
        if choice is None:
            raise ValueError(f"{config} is outside this environment's space")
        return np.array([self.canonical.index(u.actions[c]) for u, c in zip(self.space.units, choice)], dtype=np.int64)

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        index = (options or {}).get("prompt_index")
        self._index = int(self.np_random.integers(len(self.prompts))) if index is None else int(index)
        self.session = self._start(self.prompts[self._index], self.max_new_tokens)
        metrics = self._compute_metrics(self.session.trace, self.metric_names)
        self._metrics = np.stack([metrics[n] for n in self.metric_names], axis=1).astype(np.float32)
        self._steps = 0
        if self.reward_kind == "measured":  # time a plain step in this process, after one warm-up step
            for _ in range(2):  # (their tokens are kept)
                if not self.session.done:
                    self.reward_fn.t_base = self.session.step(None).time_s
        terminated = self.session.done
        return self._obs(), self._info(terminated_at_reset=terminated)

    def step(self, action):
        self._check_running()
        config, illegal = self.config_of(action)
        return self._after_step(self.session.step(config), illegal, config)

    def _check_running(self) -> None:
        if self.session is None:
            raise RuntimeError("call reset() before step()")
        if self.session.done:
            raise RuntimeError("the episode has ended; call reset()")

    def _after_step(self, record, illegal: int, config):
        self._steps += 1
        reward = float(self.reward_fn(record, self.model.num_layers))
        terminated = self.session.done
        truncated = not terminated and self._steps >= self.step_budget
        timing = {"step_time_s": record.time_s} if self.reward_kind == "measured" else {}  # cost: deterministic info
        info = self._info(illegal_actions=illegal, config=str(config), committed=record.committed,
                          accepted=record.accepted, drafted=record.drafted, **timing)
        return self._obs(), reward, terminated, truncated, info
