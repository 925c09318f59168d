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
    log = []  # every step's reward, committed tokens and the cost model's own reading of the step
    real_step = env.step

    def logged(action):
        out = real_step(action)
        step = env.session.steps[-1]
        log.append((out[1], out[4]["committed"], step.committed / env.reward_fn.predicted_cost(step)))
        return out

    env.step = logged
    results = compare_policies(env, [2, 3], {"ppo": ppo, "random": "random", "mcts": "mcts"})
    assert [r.policy for r in results] == ["ppo", "random", "mcts"]
    start = 0
    for r in results:  # each policy's summary is the mean of exactly its own steps (policies run in order)
        mine, start = log[start: start + r.steps], start + r.steps
        assert r.prompts == 2 and r.steps >= 2 and r.lossless  # every policy decodes plain decoding's tokens
        assert r.mean_reward == pytest.approx(np.mean([x[0] for x in mine]))
        assert r.mean_committed == pytest.approx(np.mean([x[1] for x in mine]))
        assert all(reward == pytest.approx(predicted) for reward, _, predicted in mine)  # the cost-model reward
    assert start == len(log)


def test_action_of_inverts_config_of(tiny_llama):
    from leap.envs.layer_search import LeapLayerSearchEnv

    env = LeapLayerSearchEnv(model=tiny_llama, prompts=[[5, 6, 7, 8]], max_new_tokens=4, reward="cost", chat=False)
    rng = np.random.default_rng(0)
    for _ in range(20):
        config = env.space.sample_config(rng)
        action = env.action_of(config)
        assert env.config_of(action) == (config, 0)
    assert env.config_of(env.action_of(None))[0] == env.space.to_config(env.space.full_choice)


def test_ppo_steps_several_environments_together(tiny_llama):
    """Issue 21: the RL example trains on several environments (SB3's DummyVecEnv) sharing one model."""
    import gymnasium as gym

    from leap.envs.layer_search import LeapLayerSearchEnv
    from leap.envs.rl import PromptSubset, train_ppo

    prompts = [[5, 6, 7, 5, 6, 7], [9, 10, 11, 9, 10], [12, 13, 14, 15]]
    envs = [LeapLayerSearchEnv(model=tiny_llama, prompts=prompts, max_new_tokens=8, reward="cost", step_budget=8,
                               chat=False) for _ in range(2)]
    steps = [0, 0]
    for i, env in enumerate(envs):
        real = env.step
        env.step = lambda action, i=i, real=real: (steps.__setitem__(i, steps[i] + 1), real(action))[1]
    ppo = train_ppo([gym.wrappers.TimeLimit(PromptSubset(e, [0, 1]), 8) for e in envs], total_timesteps=32,
                    n_steps=16, batch_size=16)
    assert ppo.n_envs == 2 and steps[0] >= 16 and steps[1] >= 16
