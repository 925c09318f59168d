from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import leap  # noqa: F401  (registers the environments)
from leap.envs.layer_search import LeapLayerSearchEnv
from tests.tiny import save_tiny_model

PROMPTS = [[5, 9, 14, 22, 31, 40, 8, 7], [11, 12, 13, 14, 15, 16], [40, 41, 42, 43, 44, 45, 46]]


def test_ids_are_registered_after_import_leap():
    assert "LeapLayerSearch-v0" in gym.registry and "LeapLayerSearchCost-v0" in gym.registry
    assert gym.registry["LeapLayerSearch-v0"].nondeterministic
    assert not gym.registry["LeapLayerSearchCost-v0"].nondeterministic


def test_cost_env_passes_check_env(tiny_llama):
    env = gym.make("LeapLayerSearchCost-v0", model=tiny_llama, prompts=PROMPTS, max_new_tokens=12, step_budget=5)
    check_env(env.unwrapped)
    env.close()


def test_measured_env_steps(tiny_qwen2):
    env = LeapLayerSearchEnv(model=tiny_qwen2, prompts=PROMPTS, max_new_tokens=10, reward="measured", step_budget=3)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert info["action_mask"].shape == (len(env.space.units), 3)
    total, done = 0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        # LEAP's reward: committed tokens x the plain step's time / this step's time
        assert env.reward_fn.t_base > 0
        assert reward == pytest.approx(info["committed"] * env.reward_fn.t_base / info["step_time_s"])
        assert env.observation_space.contains(obs)
        done = terminated or truncated
        total += 1
    assert total <= 3


def test_illegal_actions_become_execute_and_are_counted(tiny_llama):
    env = LeapLayerSearchEnv(model=tiny_llama, prompts=PROMPTS, max_new_tokens=10, reward="cost")
    env.reset(seed=1)
    action = np.full(len(env.space.units), 2)  # REPEAT everywhere: legal only in the final zone
    config, illegal = env.config_of(action)
    repeat_ok = env._mask[:, 2].astype(bool)
    assert illegal == int((~repeat_ok).sum())
    for unit, ok in zip(env.space.units, repeat_ok):
        expected = "REPEAT" if ok else "EXECUTE"
        assert all(config.actions[l].name == expected for l in unit.layers)


def test_the_precision_action_is_a_fourth_code_legal_outside_the_early_zone(tiny_llama):
    env = LeapLayerSearchEnv(model=tiny_llama, prompts=PROMPTS, max_new_tokens=10, reward="cost", low_bit=True)
    env.reset(seed=1)
    assert list(env.action_space.nvec) == [4] * len(env.space.units)
    assert [bool(m) for m in env._mask[:, 3]] == [u.zone.value != "early" for u in env.space.units]
    config, illegal = env.config_of(np.full(len(env.space.units), 3))  # LOW everywhere
    early = [u for u in env.space.units if u.zone.value == "early"]
    assert illegal == len(early) and config.low and not any(l in config.low for u in early for l in u.layers)
    assert list(env.action_of(config)) == [0 if u.zone.value == "early" else 3 for u in env.space.units]
    _, reward, *_ = env.step(np.full(len(env.space.units), 3))
    assert reward > 0


def test_greedy_output_is_lossless_in_the_env(tiny_llama):
    from leap.core import SelfSpecDecoder

    env = LeapLayerSearchEnv(model=tiny_llama, prompts=PROMPTS, max_new_tokens=16, reward="cost", step_budget=100)
    env.reset(seed=0, options={"prompt_index": 0})
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        done = terminated or truncated
    plain = SelfSpecDecoder(tiny_llama, None).generate(PROMPTS[0], max_new_tokens=16).token_ids
    assert env.session.new_token_ids == plain


def test_make_with_module_prefix_in_a_fresh_interpreter(tmp_path):
    folder = save_tiny_model(tmp_path / "tiny")
    code = (
        "import gymnasium as gym\n"
        f"env = gym.make('leap.envs:LeapLayerSearchCost-v0', model={str(folder)!r}, prompts=[[5, 6, 7, 8]],"
        " max_new_tokens=4)\n"
        "obs, info = env.reset(seed=0)\n"
        "print(sorted(obs))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "acceptance" in out.stdout


def test_empty_prompts_are_refused(tiny_llama):
    from leap.core.errors import SettingsError

    with pytest.raises(SettingsError, match="prompts is empty"):
        LeapLayerSearchEnv(model=tiny_llama, prompts=[])


# ---------------------------------------------------------------- the drafter dimension
def test_the_drafter_environment_keeps_the_layers_and_adds_the_drafter_dimension(tiny_llama):
    assert gym.registry["LeapDrafterSearch-v0"].nondeterministic
    env = gym.make("LeapDrafterSearchCost-v0", model=tiny_llama, prompts=PROMPTS, max_new_tokens=12, step_budget=5,
                   drafters=["layer-skip", "prompt-lookup", "suffix"])
    u = len(env.unwrapped.space.units)
    assert list(env.action_space.nvec) == [3] * u + [3]
    check_env(env.unwrapped)
    _, info = env.reset(seed=0)
    assert info["drafters"] == ["layer-skip", "prompt-lookup", "suffix"]
    choice, _ = env.unwrapped.config_of([0] * u + [2])
    assert str(choice) == "suffix" and choice.config is None  # model-free: no layer configuration
    choice, _ = env.unwrapped.config_of([0] * u + [0])
    assert choice.config is not None
    v0 = gym.make("LeapLayerSearchCost-v0", model=tiny_llama, prompts=PROMPTS, max_new_tokens=12)
    assert list(v0.action_space.nvec) == [3] * u  # v0's meaning is unchanged


def test_v1_greedy_output_is_lossless_whatever_the_drafter(tiny_llama):
    from leap.core import SelfSpecDecoder
    from leap.envs.drafter_search import LeapDrafterSearchEnv

    env = LeapDrafterSearchEnv(model=tiny_llama, prompts=PROMPTS, max_new_tokens=16, reward="measured",
                               step_budget=100)
    env.action_space.seed(0)
    for episode in range(2):  # the second episode starts with drafters that learnt from the first
        env.reset(seed=episode, options={"prompt_index": 1})
        done = False
        while not done:
            _, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert reward == pytest.approx(info["committed"] * env.reward_fn.t_base / info["step_time_s"])
            done = terminated or truncated
        plain = SelfSpecDecoder(tiny_llama, None).generate(PROMPTS[1], max_new_tokens=16).token_ids
        assert env.unwrapped.session.new_token_ids == plain


_VECTOR_RUN = """
import sys
import gymnasium as gym
import numpy as np
import torch
import leap


def main():
    torch.ones(256, 256) @ torch.ones(256, 256)  # the parent's thread pool is live before the workers fork
    # the measured env: no calibration in every worker; 64 tokens, so every copy runs out its step budget first
    mode, vector_kwargs = sys.argv[2], {{}}
    if mode == "async-spawn":  # what a GPU machine needs: forked workers cannot use CUDA once the parent has
        mode, vector_kwargs = "async", {{"context": "spawn"}}
    envs = gym.make_vec("LeapLayerSearch-v0", num_envs=2, vectorization_mode=mode, vector_kwargs=vector_kwargs,
                        model=sys.argv[1], prompts={prompts!r}, max_new_tokens=64, step_budget=3, chat=False)
    obs, _ = envs.reset(seed=0)
    assert obs["zones"].shape[0] == 2
    truncated_seen = False
    for _ in range(4):
        obs, reward, terminated, truncated, _ = envs.step(envs.action_space.sample())
        assert reward.shape == (2,) and np.all(np.isfinite(reward))
        truncated_seen |= bool(truncated.all())
    assert truncated_seen  # each copy ran out its step budget
    envs.close()
    print("vector ok")


if __name__ == "__main__":  # spawned workers import this file again
    main()
"""


@pytest.mark.heavy
@pytest.mark.parametrize("mode", ["sync", "async", "async-spawn"])
def test_vector_envs_step_every_copy(tmp_path, mode):
    """gym.make_vec, both modes, in a subprocess with a time limit: async workers fork after the parent used
    torch's thread pool, and without leap's at-fork hook they hang (in the constructor, where no timeout
    reaches). On a CUDA machine a forked worker cannot use CUDA (the parent built one environment, on the GPU,
    to read its spaces): there "async" must fail with leap's error naming spawn, and "async-spawn" must run."""
    path = save_tiny_model(tmp_path, "llama")
    script = tmp_path / "vector_run.py"
    script.write_text(_VECTOR_RUN.format(prompts=PROMPTS))
    import os
    import signal

    run = subprocess.Popen([sys.executable, str(script), str(path), mode], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = run.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)  # the hung workers too
        run.communicate()
        pytest.fail(f"gym.make_vec(..., vectorization_mode={mode!r}) hung")
    if mode == "async" and torch.cuda.is_available():
        assert run.returncode != 0 and 'vector_kwargs={"context": "spawn"}' in err, err[-2000:]
        return
    assert run.returncode == 0 and "vector ok" in out, err[-2000:]
