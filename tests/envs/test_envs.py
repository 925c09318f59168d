"""Every registered leap environment through Gymnasium's own checker, as Gymnasium runs its own
(``tests/envs/test_envs.py`` there): a new environment id is checked without a test of its own."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import leap  # noqa: F401  (registers the environments)
from leap.envs import ENV_IDS

PROMPTS = [[5, 9, 14, 22, 31, 40, 8, 7], [11, 12, 13, 14, 15, 16], [40, 41, 42, 43, 44, 45, 46]]
#: what each environment needs beyond the model and prompts to run on a tiny model in a few steps
SMALL = {"LeapBatchSpec-v0": dict(drafter="suffix", batch_size=2, chat=False, max_new_tokens=12)}


def test_every_leap_id_is_in_env_ids():
    assert {env_id for env_id in gym.registry if env_id.startswith("Leap")} == set(ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_registered_environment_passes_check_env(env_id, tiny_llama):
    kwargs = SMALL.get(env_id, dict(max_new_tokens=12, step_budget=5))
    env = gym.make(env_id, model=tiny_llama, prompts=PROMPTS, **kwargs)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    env.close()
