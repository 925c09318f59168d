from __future__ import annotations

import pytest

from leap.core.errors import UnknownNameError
from leap.core.registry import Registry


def test_register_get_and_miss_lists_names():
    reg: Registry = Registry("widget")

    @reg.register("b")
    class B: ...

    reg.add("a", int)
    assert reg.get("b") is B and reg.names() == ["a", "b"] and "a" in reg
    with pytest.raises(UnknownNameError, match=r"unknown widget 'c'; registered: a, b"):
        reg.get("c")


def test_duplicates_refused_unless_overwrite():
    reg: Registry = Registry("widget")
    reg.add("a", int)
    with pytest.raises(ValueError, match="already registered"):
        reg.add("a", float)
    reg.add("a", float, overwrite=True)
    assert reg.create("a", "2.5") == 2.5
    reg.remove("a")
    assert reg.names() == []


def test_entry_points_are_read_lazily_and_local_wins(monkeypatch):
    class FakeEP:
        def __init__(self, name, obj):
            self.name, self._obj = name, obj

        def load(self):
            return self._obj

    calls = []

    def fake_entry_points(group):
        calls.append(group)
        return [FakeEP("plugin", dict), FakeEP("local", list)]

    monkeypatch.setattr("leap.core.registry.metadata.entry_points", fake_entry_points)
    reg: Registry = Registry("widget", "leap.test_group")
    reg.add("local", tuple)
    assert calls == []
    assert reg.get("plugin") is dict
    assert reg.get("local") is tuple
    assert calls == ["leap.test_group"]


def test_a_constructors_error_names_the_entry_and_declared_types_are_checked_first():
    """Issue 36: `--agent-arg t0=hot` surfaced as a bare TypeError from inside the agent."""
    import numpy as np

    from leap.core.drafters import drafters
    from leap.core.errors import SettingsError
    from leap.redundancy import build_search_space
    from leap.search import search_agents

    space = build_search_space(np.ones(6), np.zeros(6))
    with pytest.raises(SettingsError, match="search agent 'mcts': .*nope"):
        search_agents.create("mcts", space, nope=1)
    with pytest.raises(SettingsError, match="drafter 'suffix': num_tokens must be an integer"):
        drafters.create("suffix", num_tokens="six")
    with pytest.raises(SettingsError, match="drafter 'suffix' has no setting 'num_token'; it takes: "):
        drafters.create("suffix", num_token=6)
