"""``LeapBatchSpec-v0`` (issue 37): a batch of B requests, one batched step per action (its chain cap)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import leap  # noqa: F401  (registers the environments)
from leap.core import SelfSpecDecoder
from leap.core.errors import SettingsError
from leap.envs.batch_search import LeapBatchSpecEnv

# repetitive prompts, so that prompt lookup drafts and its drafts are accepted
PROMPTS = [[5, 9, 14, 22, 5, 9, 14, 22, 5, 9, 14], [11, 12, 13, 11, 12, 13, 11, 12], [40, 41, 42, 43, 40, 41, 42],
           [7, 8, 7, 8, 7, 8, 7]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_row_is_what_decoding_it_alone_gives_whatever_the_caps(tiny_llama, seed):
    """Lossless per row: random caps every step (0 = plain, up to 8 drafts), every row token-identical to plain greedy
    decoding of its prompt alone; the batch size is in the observation, and the episode ends when every row has."""
    env = LeapBatchSpecEnv(tiny_llama, "prompt-lookup", batch_size=3, caps=(0, 2, 8), prompts=PROMPTS,
                           max_new_tokens=20)
    obs, info = env.reset(seed=seed)
    assert env.observation_space.contains(obs) and obs[0] == 3 and info["caps"] == [0, 2, 8]
    rng = np.random.default_rng(seed)
    done = False
    while not done:
        obs, reward, done, truncated, info = env.step(int(rng.integers(3)))
        assert env.observation_space.contains(obs) and obs[0] == 3 and not truncated and reward >= 0
    plain = SelfSpecDecoder(tiny_llama, None)
    for index, row in zip(info["prompt_indices"], info["token_ids"]):
        assert row == plain.generate(PROMPTS[index], max_new_tokens=20).token_ids
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_the_action_sets_how_far_rows_draft_and_the_reward_is_goodput_over_plain(tiny_llama):
    """Cap 0 commits one token a row (a plain step); the largest cap lets prompt lookup's accepted drafts commit more
    (red when the action is ignored); the reward is the step's goodput over the plain batched step timed at reset."""
    env = LeapBatchSpecEnv(tiny_llama, "prompt-lookup", batch_size=4, caps=(0, 8), prompts=PROMPTS,
                           max_new_tokens=24)
    env.reset(seed=0, options={"prompt_indices": [0, 1, 2, 3]})
    assert env.t_base > 0
    _, reward, done, _, info = env.step(0)
    assert info["cap"] == 0 and info["committed"] == info["rows"]
    assert reward == pytest.approx(info["committed"] * env.t_base / (info["step_time_s"] * 4))
    most = 0
    while not done:
        _, reward, done, _, info = env.step(1)
        most = max(most, info["committed"] - info["rows"])
    assert most > 0, "no step with cap 8 committed more than one token a row"


def test_registered_and_refuses_what_cannot_draft_in_a_batch(tiny_llama):
    assert gym.registry["LeapBatchSpec-v0"].nondeterministic
    env = gym.make("LeapBatchSpec-v0", model=tiny_llama, drafter="suffix", batch_size=2, prompts=PROMPTS,
                   max_new_tokens=6)
    obs, _ = env.reset(seed=0)
    assert obs[0] == 2 and obs[1] == 2
    with pytest.raises(SettingsError, match="batch"):
        LeapBatchSpecEnv(tiny_llama, "layer-skip", prompts=PROMPTS)
    with pytest.raises(SettingsError, match="caps"):
        LeapBatchSpecEnv(tiny_llama, "suffix", caps=(2, 2), prompts=PROMPTS)
    with pytest.raises(SettingsError, match="prompt_indices"):
        env.unwrapped.reset(options={"prompt_indices": [0]})
