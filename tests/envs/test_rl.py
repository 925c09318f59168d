"""The RL example (leap.envs.rl), short form: PPO trains on some prompts of the cost-model environment and
is compared with random actions and LEAP's MCTS on held-out prompts."""

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")


def test_ppo_trains_and_is_compared_on_held_out_prompts(tiny_llama):
    import gymnasium as gym

    from leap.envs.layer_search import LeapLayerSearchEnv
    from leap.envs.rl import PromptSubset, compare_policies, train_ppo

    prompts = [[5, 6, 7, 5, 6, 7], [9, 10, 11, 9, 10], [12, 13, 14, 15], [20, 21, 20, 21, 20]]
    env = LeapLayerSearchEnv(model=tiny_llama, prompts=prompts, max_new_tokens=8, reward="cost", step_budget=8,
                             chat=False)
    train = gym.wrappers.TimeLimit(PromptSubset(env, [0, 1]), 8)
    ppo = train_ppo(train, total_timesteps=64, n_steps=32, batch_size=16)
    obs, info = env.reset(options={"prompt_index": 2})
    action = ppo.predict(obs, deterministic=True)[0]
    assert env.action_space.contains(np.asarray(action, dtype=np.int64))
    results = {r.policy: r for r in compare_policies(env, [2, 3], {"ppo": ppo, "random": "random", "mcts": "mcts"})}
    assert set(results) == {"ppo", "random", "mcts"}
    for r in results.values():
        assert r.prompts == 2 and r.steps >= 2 and r.lossless  # every policy decodes plain decoding's tokens
        assert 0 < r.mean_reward < 10 and 1 <= r.mean_committed <= 8


def test_action_of_inverts_config_of(tiny_llama):
    from leap.envs.layer_search import LeapLayerSearchEnv

    env = LeapLayerSearchEnv(model=tiny_llama, prompts=[[5, 6, 7, 8]], max_new_tokens=4, reward="cost", chat=False)
    rng = np.random.default_rng(0)
    for _ in range(20):
        config = env.space.sample_config(rng)
        action = env.action_of(config)
        assert env.config_of(action) == (config, 0)
    assert env.config_of(env.action_of(None))[0] == env.space.to_config(env.space.full_choice)
