"""The drafter dimension: JointSpace yields only valid (drafter, config) pairs, and the agents that
search it jointly (mcts, ucb, bayes, random) propose only such pairs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core.config import LayerConfig
from leap.core.errors import ConfigError, SettingsError
from leap.search import SearchHistory, make_agent
from leap.search.drafter_space import DraftChoice, DrafterOption, JointSpace, parse_option, with_drafters
from tests.search.spaces import search_spaces

OPTION_SETS = st.lists(st.sampled_from(["layer-skip", "prompt-lookup", "prompt-lookup:num_tokens=4", "suffix",
                                        "token-recycling", "hybrid", "hybrid:min_free=0",
                                        "exit-head:layer=2", "exit-head:layer=5"]),  # exits: only units below k
                       min_size=1, max_size=5, unique=True)
JOINT_AGENTS = ["mcts", "ucb", "bayes", "random"]


def check_pair(space: JointSpace, choice: DraftChoice) -> None:
    assert isinstance(choice, DraftChoice) and choice.drafter in space.options
    if choice.drafter.uses_layers:
        assert isinstance(choice.config, LayerConfig) and space.layer_space.from_config(choice.config) is not None
        assert not all(a.name == "SKIP" for a in choice.config.actions)
        k = choice.drafter.exit_layer(space.num_layers)
        if k is not None:  # an exit drafter: every unit from its exit layer on executes, and no layer band applies
            above = [l for u in space.units if u.layers[0] >= k for l in u.layers]
            assert all(choice.config.actions[l].name == "EXECUTE" for l in above), (k, str(choice.config))
            assert choice.layer_ratio is None
    else:
        assert choice.config is None
    assert space.is_valid(space.from_config(choice))


@settings(max_examples=40)
@given(layer_space=search_spaces(max_layers=10), options=OPTION_SETS, seed=st.integers(0, 1000))
def test_samples_are_valid_pairs_and_round_trip(layer_space, options, seed):
    space = with_drafters(layer_space, options)
    rng = np.random.default_rng(seed)
    for _ in range(20):
        choice = space.sample(rng)
        assert space.is_valid(choice)
        pair = space.to_config(choice)
        check_pair(space, pair)
        assert space.to_config(space.from_config(pair)) == pair
    if layer_space.size() <= 300:  # size and enumerate count each distinct draft once
        product = itertools.product(*(range(n) for n in space.action_counts))
        distinct = {space.to_config(c) for c in product if space.is_valid(c)}
        assert space.size() == len(distinct)
        assert sorted(map(str, (space.to_config(c) for c in space.enumerate()))) == sorted(map(str, distinct))


@pytest.mark.parametrize("name", JOINT_AGENTS)
@settings(max_examples=10)
@given(layer_space=search_spaces(max_layers=12), options=OPTION_SETS, seed=st.integers(0, 1000),
       n=st.integers(1, 30))
def test_joint_agents_propose_only_valid_pairs(name, layer_space, options, seed, n):
    space = with_drafters(layer_space, options)
    agent = make_agent(name, space, seed=seed)
    history = SearchHistory()
    for i in range(n):
        pair = agent.ask(history)
        if pair is not None:  # plain decoding stays allowed
            check_pair(space, pair)
        reward = 1.0 if pair is None else 1.5 - 0.1 * (i % 3) + (0.3 if pair.config is None else 0.0)
        history.record(pair, reward)
        agent.record(pair, reward, history)
    best = agent.best(history)
    assert best is None or space.from_config(best) is not None


def test_mcts_tries_every_drafter_option_first():
    from tests.search.spaces import search_spaces as _  # noqa: F401 (same helpers)
    from leap.redundancy import build_search_space

    layer_space = build_search_space(np.linspace(0.1, 1.5, 8), np.zeros(8), metrics={})
    options = ["layer-skip", "prompt-lookup", "suffix", "token-recycling"]
    agent = make_agent("mcts", with_drafters(layer_space, options), seed=0)
    history = SearchHistory()
    seen = []
    for _ in range(4):
        pair = agent.ask(history)
        seen.append(pair.drafter.label)
        history.record(pair, 1.2)
        agent.record(pair, 1.2, history)
    assert sorted(seen) == sorted(options)


def test_mcts_searches_only_the_units_below_an_exit_drafters_layer():
    """Under an exit option MCTS's subtree ends at the last unit reaching below the exit; a good exit draft is
    chosen as best when it pays (no layer band: red when its configuration's full-model ratio is shaped, -5)."""
    from leap.redundancy import build_search_space
    layer_space = build_search_space(np.linspace(0.1, 1.5, 12), np.zeros(12), zones=False, groups=False, metrics={})
    space = with_drafters(layer_space, ["layer-skip", "exit-head:layer=4"])
    assert space.units_used(1) == 4 and space.units_used(0) == 12
    agent = make_agent("mcts", space, seed=0)
    history = SearchHistory()
    for _ in range(60):
        pair = agent.ask(history)
        reward = 1.6 if pair.drafter.name == "exit-head" else 0.9
        history.record(pair, reward)
        agent.record(pair, reward, history)
    tree = agent.tree
    under_exit = [n for n in range(len(tree.parent)) if tree.path(n)[:1] == [1]]
    assert under_exit and max(tree.depth[n] for n in under_exit) == 1 + 4
    assert agent.best(history).drafter.name == "exit-head"


def test_option_parsing_and_errors():
    opt = parse_option("prompt-lookup:num_tokens=4,max_ngram=2")
    assert opt == DrafterOption("prompt-lookup", (("max_ngram", 2), ("num_tokens", 4)))
    assert opt.label == "prompt-lookup:max_ngram=2,num_tokens=4" and not opt.uses_layers
    assert parse_option("hybrid").uses_layers and not parse_option("hybrid:min_free=0").uses_layers
    with pytest.raises(SettingsError, match="KEY=VALUE, got 'oops'"):
        parse_option("suffix:oops")
    from leap.redundancy import build_search_space

    layer_space = build_search_space(np.linspace(0.1, 1.5, 6), np.zeros(6), metrics={})
    with pytest.raises(SettingsError, match="repeat"):
        with_drafters(layer_space, ["suffix", "suffix"])
    space = with_drafters(layer_space, ["suffix", "layer-skip"])
    with pytest.raises(ConfigError, match="out of range"):
        space.to_config((*layer_space.full_choice, 5))
    # a choice with one action per unit means the first option (agents written for layer spaces)
    assert space.to_config(layer_space.full_choice).drafter.label == "suffix"


def test_options_that_cannot_draft_for_the_model_leave_the_search_with_a_warning(tiny_llama, tmp_path, monkeypatch):
    """``eagle`` with no trained head for the model is left out of a drafter search (warned, with the
    fix); given a head it stays; nothing usable is a clear error. The per-prompt factory applies it."""
    from leap.search.drafter_space import usable_options
    from leap.search.factory import agent_factory
    from leap.core.decoding.decoder import SelfSpecDecoder

    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))  # no head trained for the tiny model here
    with pytest.warns(UserWarning, match="eagle left out of the search: no draft head for tiny"):
        kept = usable_options(["prompt-lookup", "eagle"], tiny_llama)
    assert [o.label for o in kept] == ["prompt-lookup"]
    assert [o.label for o in usable_options(["eagle:head=untrained"], tiny_llama)] == ["eagle:head=untrained"]
    with pytest.raises(SettingsError, match="none of the drafter options"), pytest.warns(UserWarning):
        usable_options(["eagle"], tiny_llama)
    trace = SelfSpecDecoder(tiny_llama, None).start([5, 6, 7, 8], max_new_tokens=2, trace_positions=4).trace
    with pytest.warns(UserWarning, match="eagle"):
        agent = agent_factory("leap", tiny_llama.num_layers, drafters=["suffix", "eagle"], seed=0)(trace)
    assert [o.label for o in agent.space.options] == ["suffix"]


def test_declared_settings_expand_into_options_and_fixed_ones_stay():
    from leap.search.drafter_space import expand_settings

    labels = [o.label for o in expand_settings(["lowbit", "lowbit:num_tokens=8", "suffix"])]
    assert labels == ["lowbit:num_tokens=6", "lowbit:num_tokens=10", "lowbit:num_tokens=14", "lowbit:num_tokens=8",
                      "suffix"]


def test_every_drafters_declared_settings_make_valid_drafters():
    """Contract over the registry: each declared searchable value builds the drafter (a value its constructor
    refuses would fail a search at its first trial)."""
    from leap.core.drafters import drafters, make_drafter

    for name in drafters.names():
        cls = drafters.get(name)
        assert isinstance(cls.search_settings, dict)
        for key, values in cls.search_settings.items():
            assert values, f"{name}.search_settings[{key!r}] is empty"
            for value in values:
                make_drafter(name, **{**dict(cls.example_kwargs), key: value})
