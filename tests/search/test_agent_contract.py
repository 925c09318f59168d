"""Contract every registered search agent passes (parametrised over the registry, hypothesis-driven)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core.config import LayerConfig
from leap.search import SearchHistory, make_agent, search_agents
from leap.testing.contracts import run_agent
from tests.search.spaces import reward_of, search_spaces

AGENTS = search_agents.names()
# agents whose every ask is costly (Optuna's GP fits a Gaussian process per trial, ~0.5 s on a 2-core CPU)
# run the longest property tests on fewer drawn spaces
FEWER_EXAMPLES = {"optuna-gp": 2, "bayes": 1, "nevergrad": 4, "nevergrad-ngopt": 4}  # NGOpt: ~0.3 s per drawn space


def _examples(name: str, default: int) -> int:
    return min(default, FEWER_EXAMPLES.get(name, default))


def _run(agent, n, history=None):
    return run_agent(agent, n, history, reward=reward_of)


@pytest.mark.parametrize("name", AGENTS)
def test_proposals_are_inside_the_space_and_obey_zones(name):
    @settings(max_examples=_examples(name, 15))
    @given(space=search_spaces(), n=st.integers(1, 25), seed=st.integers(0, 1000))
    def check(space, n, seed):
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

    check()


@pytest.mark.parametrize("name", AGENTS)
def test_same_seed_same_proposals(name):
    @settings(max_examples=_examples(name, 10))
    @given(space=search_spaces(), seed=st.integers(0, 1000))
    def check(space, seed):
        n = 9 if name in FEWER_EXAMPLES else 15  # costly asks: 6 space-filling + 3 model-based proposals
        a, _ = _run(make_agent(name, space, seed=seed), n)
        b, _ = _run(make_agent(name, space, seed=seed), n)
        assert a == b

    check()


@pytest.mark.parametrize("name", AGENTS)
@settings(max_examples=10)
@given(space=search_spaces(), seed=st.integers(0, 1000))
def test_tell_never_changes_history(name, space, seed):
    agent = make_agent(name, space, seed=seed)
    _, history = _run(agent, 5)
    before = history.trials
    config = agent.ask(history)
    frozen = copy.deepcopy(history.trials)
    agent.record(config, 1.0, history)
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
def test_different_seeds_give_different_searches_unless_declared_deterministic(name):
    """A seed that does nothing (Optuna's QMCSampler unscrambled: issue 33) fails here; an agent that declares
    ``seeded = False`` must indeed ignore its seed."""
    import numpy as np

    from leap.redundancy import build_search_space

    space = build_search_space(np.linspace(1, 0, 16), np.zeros(16) + 0.01, metrics={"cosine": np.linspace(0, 1, 16)})
    runs = {tuple(map(str, _run(make_agent(name, space, seed=seed), 8)[0])) for seed in range(4)}
    agent = search_agents.get(name)
    assert (len(runs) > 1) == agent.seeded, f"{name}: {len(runs)} distinct searches over 4 seeds, seeded={agent.seeded}"


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


def _plain_space():
    import numpy as np

    from leap.redundancy import build_search_space

    return build_search_space(np.linspace(1, 0, 12), np.zeros(12) + 0.01, metrics={"cosine": np.linspace(0, 1, 12)})


def test_an_agent_that_overrides_tell_without_super_still_converges():
    from leap.search import SearchAgent

    class Forgetful(SearchAgent):
        """always proposes plain decoding; its tell forgets super()"""

        def ask(self, history):
            return None

        def tell(self, config, reward, history):
            self.last = reward  # no super().tell(...)

    agent = Forgetful(_plain_space(), patience=3, min_iterations=4)
    _, history = _run(agent, 4)
    assert agent.converged(history) and agent.last == 1.0


@pytest.mark.parametrize("name", AGENTS)
def test_a_users_own_ask_tell_loop_converges_like_the_runners(name):
    """Optuna-style: a loop that calls ask/tell/converged itself (never record) stops when the runner's would."""
    space = _plain_space()

    def loop(use_record):
        agent = make_agent(name, space, seed=3, patience=3, min_iterations=4)
        history, n = SearchHistory(), 0
        while n < 60 and not agent.converged(history):
            config = agent.ask(history)
            history.record(config, reward_of(config))
            (agent.record if use_record else agent.tell)(config, reward_of(config), history)
            n += 1
        return n

    # equal iteration counts: CLaSP never converges by design (60 both ways); the others stop early
    assert loop(use_record=False) == loop(use_record=True)


def test_a_declared_persistent_agent_keeps_its_state_across_prompts(tiny_llama):
    from leap.core import SelfSpecDecoder
    from leap.search import SearchAgent
    from leap.search.factory import agent_factory
    from leap.search.runner import OnlineSearch, SearchSettings

    @search_agents.register("test-counting")
    class Counting(SearchAgent):
        """counts every trial it has been told about, over all prompts"""

        persistent = True

        def __init__(self, space, **kwargs):
            super().__init__(space, **kwargs)
            self.told = 0

        def ask(self, history):
            return None

        def tell(self, config, reward, history):
            self.told += 1

    try:
        runner = OnlineSearch(SelfSpecDecoder(tiny_llama, None), agent_factory("test-counting", 6, seed=0),
                              SearchSettings(budget=3, give_up=0, loss_budget=0))
        first = runner.generate([5, 6, 7, 8], max_new_tokens=12)
        agent = runner.agent
        second = runner.generate([9, 10, 11, 12], max_new_tokens=12)
        assert runner.agent is agent and agent.told == first.iterations + second.iterations == 6
        # a per-prompt agent (the default) starts afresh on each prompt
        per_prompt = agent_factory("random", 6, seed=0)
        assert per_prompt(SelfSpecDecoder(tiny_llama, None).start([5, 6, 7], trace_positions=4).trace) is not \
            per_prompt(SelfSpecDecoder(tiny_llama, None).start([5, 6, 7], trace_positions=4).trace)
    finally:
        search_agents.remove("test-counting")


def test_a_best_outside_the_history_is_a_clear_error(tiny_llama):
    from leap.core import SelfSpecDecoder
    from leap.core.errors import SettingsError
    from leap.search import SearchAgent
    from leap.search.runner import OnlineSearch, SearchSettings

    class Liar(SearchAgent):
        """tries plain decoding, then claims an untried configuration is best"""

        name = "liar"

        def ask(self, history):
            return None

        def best(self, history):
            return LayerConfig.from_sets(6, skip=[2])

    runner = OnlineSearch(SelfSpecDecoder(tiny_llama, None), Liar(_plain_space()), SearchSettings(budget=2, give_up=0))
    with pytest.raises(SettingsError, match="'liar'.*never tried"):
        runner.generate([5, 6, 7, 8], max_new_tokens=12)


def test_the_agent_in_the_base_class_docstring_runs_and_passes_the_contract():
    """The ten-line agent of ``SearchAgent``'s docstring (also README's and docs/agents.md's) is a doctest."""
    import doctest

    import leap.search.base

    result = doctest.testmod(leap.search.base)
    assert result.attempted >= 5 and result.failed == 0
