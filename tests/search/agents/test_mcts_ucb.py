"""MCTS and UCB invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.redundancy import build_search_space
from leap.search import SearchHistory, make_agent
from leap.search.agents.mcts import MCTSSettings, shaped_reward
from tests.search.spaces import search_spaces


def _drive(agent, reward, n):
    history = SearchHistory()
    for _ in range(n):
        config = agent.ask(history)
        r = reward(config)
        history.record(config, r)
        agent.record(config, r, history)
    return history


@settings(max_examples=20)
@given(space=search_spaces(), n=st.integers(1, 40), seed=st.integers(0, 100))
def test_mcts_tree_statistics(space, n, seed):
    agent = make_agent("mcts", space, seed=seed)
    rewards: dict[int, list[float]] = {}
    history = SearchHistory()
    for _ in range(n):
        config = agent.ask(history)
        r = float(np.random.default_rng(hash(str(config)) % 2**32).random() * 2)
        history.record(config, r)
        agent.record(config, r, history)
    tree = agent.tree
    assert tree.visits[0] == n  # root visits = iterations
    for node in range(1, len(tree.parent)):
        assert tree.visits[node] <= tree.visits[tree.parent[node]]
        kids = tree.children[node].values()
        if tree.visits[node] and kids:
            assert sum(tree.visits[k] for k in kids) <= tree.visits[node]
    # values are means of the shaped rewards backpropagated through the node: check at the root
    shaped = [shaped_reward(t.reward, t.config.layer_ratio, agent.settings) for t in history]
    assert tree.q(0) == pytest.approx(float(np.mean(shaped)))
    del rewards


def test_mcts_finds_the_single_best_configuration_of_a_small_space():
    rng = np.random.default_rng(0)
    space = build_search_space(rng.random(10), rng.normal(0, 0.3, 10), groups=True)
    choices = list(space.enumerate())
    assert 4 <= len(choices) <= 64
    target = space.to_config(choices[len(choices) // 2])
    settings_ = MCTSSettings(shaping=False, ratio_band=(0.0, 3.0))

    def reward(config):
        return 3.0 if config == target else 1.0 - 0.01 * sum(a != b for a, b in zip(config.actions, target.actions))

    agent = make_agent("mcts", space, seed=1, settings=settings_)
    history = _drive(agent, reward, 40)
    assert agent.best(history) == target


def test_shaped_reward_follows_leap():
    s = MCTSSettings()
    assert shaped_reward(0.5, 0.45, s) == pytest.approx(4 * -0.5 + 0.6)
    assert shaped_reward(1.02, 0.45, s) == pytest.approx(-0.2 + 0.6)
    assert shaped_reward(1.2, 0.40, s) == pytest.approx(0.2)
    assert shaped_reward(2.0, 0.45, s) == pytest.approx(1.2 + 0.6)
    assert shaped_reward(2.0, 0.60, s) == pytest.approx(1.2 - 8 * 0.1)
    assert shaped_reward(2.0, 0.30, s) == pytest.approx(1.2 - 3 * 0.1)
    assert shaped_reward(9.0, 0.9, s) == -5.0
    assert shaped_reward(50.0, 0.45, s) == 5.0


@settings(max_examples=20)
@given(space=search_spaces(), n=st.integers(1, 40), seed=st.integers(0, 100))
def test_ucb_counts_and_round_robin(space, n, seed):
    agent = make_agent("ucb", space, seed=seed)
    history = SearchHistory()
    seen = []
    for _ in range(n):
        config = agent.ask(history)
        if len(seen) < len(agent.arms):
            assert config not in seen  # every arm once before any repeats
        seen.append(config)
        history.record(config, 1.0)
        agent.record(config, 1.0, history)
    assert sum(agent.counts) == n
    assert agent.arms[0] is None  # plain decoding is an arm
