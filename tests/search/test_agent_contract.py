"""Contract every registered search agent passes (parametrised over the registry, hypothesis-driven)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core.config import LayerConfig
from leap.search import SearchHistory, make_agent, search_agents
from tests.search.spaces import reward_of, search_spaces

AGENTS = search_agents.names()


def _run(agent, n, history=None):
    history = history or SearchHistory()
    proposals = []
    for _ in range(n):
        config = agent.ask(history)
        proposals.append(config)
        r = reward_of(config)
        history.record(config, r)
        agent.tell(config, r, history)
    return proposals, history


@pytest.mark.parametrize("name", AGENTS)
@settings(max_examples=15)
@given(space=search_spaces(), n=st.integers(1, 25), seed=st.integers(0, 1000))
def test_proposals_are_inside_the_space_and_obey_zones(name, space, n, seed):
    agent = make_agent(name, space, seed=seed)
    proposals, _ = _run(agent, n)
    for config in proposals:
        if config is None:  # plain decoding is always allowed
            continue
        assert isinstance(config, LayerConfig) and config.num_layers == space.num_layers
        choice = space.from_config(config)
        assert choice is not None and space.is_valid(choice)
    best = agent.best(_run(make_agent(name, space, seed=seed), n)[1])
    assert best is None or space.from_config(best) is not None


@pytest.mark.parametrize("name", AGENTS)
@settings(max_examples=10)
@given(space=search_spaces(), seed=st.integers(0, 1000))
def test_same_seed_same_proposals(name, space, seed):
    a, _ = _run(make_agent(name, space, seed=seed), 15)
    b, _ = _run(make_agent(name, space, seed=seed), 15)
    assert a == b


@pytest.mark.parametrize("name", AGENTS)
@settings(max_examples=10)
@given(space=search_spaces(), seed=st.integers(0, 1000))
def test_tell_never_changes_history(name, space, seed):
    agent = make_agent(name, space, seed=seed)
    _, history = _run(agent, 5)
    before = history.trials
    config = agent.ask(history)
    frozen = copy.deepcopy(history.trials)
    agent.tell(config, 1.0, history)
    assert history.trials == frozen == before


@pytest.mark.parametrize("name", AGENTS)
@settings(max_examples=10)
@given(space=search_spaces(), seed=st.integers(0, 1000), n=st.integers(0, 12))
def test_state_dict_round_trips(name, space, seed, n):
    agent = make_agent(name, space, seed=seed)
    _, history = _run(agent, n)
    state = agent.state_dict()
    clone = make_agent(name, space, seed=seed + 1)
    clone.load_state_dict(copy.deepcopy(state))
    assert [clone.ask(history) for _ in range(3)] == [agent.ask(history) for _ in range(3)]


@pytest.mark.parametrize("name", AGENTS)
def test_reseed_restarts_the_sequence(name):
    import numpy as np

    from leap.redundancy import build_search_space

    space = build_search_space(np.linspace(1, 0, 16), np.zeros(16) + 0.01, metrics={"cosine": np.linspace(0, 1, 16)})
    first, _ = _run(make_agent(name, space, seed=3), 6)
    fresh = make_agent(name, space, seed=99)
    fresh.reseed(3)
    assert _run(fresh, 6)[0] == first


def test_unknown_agent_lists_the_registered_ones():
    import numpy as np

    from leap.core.errors import UnknownNameError
    from leap.redundancy import build_search_space

    with pytest.raises(UnknownNameError, match="registered: bayes, clasp, mcts"):
        make_agent("nope", build_search_space(np.ones(6), np.zeros(6)))
