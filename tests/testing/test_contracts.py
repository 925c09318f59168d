"""The plug-in contracts an installed leap runs (leap.testing.contracts, `leap check --import`)."""

from __future__ import annotations

import pytest

from leap.testing import contracts
from leap.cli import main
from leap.redundancy.base import redundancy_metrics
from leap.search import SearchAgent, search_agents

PLUGIN = '''
import numpy as np
from leap.redundancy.base import RedundancyMetric, redundancy_metrics

@redundancy_metrics.register("check-chatty")
class Chatty(RedundancyMetric):
    """Reads each layer's value on its own: one host read per layer."""

    def compute(self, trace):
        return np.array([float((trace.hidden[l + 1] - trace.hidden[l]).norm().item()) for l in range(trace.num_layers)])
'''


class Forgetful(SearchAgent):
    """Walks the skippable units in a seeded order, and forgets where it was on resume (no state_dict)."""

    def __init__(self, space, *, seed=None, **kwargs):
        super().__init__(space, seed=seed, **kwargs)
        self.order = [int(i) for i in self.rng.permutation(len(space.units))]
        self.i = 0

    def ask(self, history):
        choice = list(self.space.full_choice)
        unit = self.space.units[self.order[self.i % len(self.order)]]
        self.i += 1
        choice[self.order[(self.i - 1) % len(self.order)]] = len(unit.actions) - 1
        return self.space.to_config(choice) if self.space.is_valid(choice) else None


@pytest.fixture(scope="module")
def model():
    return contracts.contract_model()


def test_built_in_plugins_pass(model):
    assert contracts.check_agent("random") == []
    assert contracts.check_metric("cosine", model) == []
    assert contracts.check_drafter("prompt-lookup", model) == []


def test_a_forgetful_agent_is_told_to_extend_state_dict():
    search_agents.add("check-forgetful", Forgetful)
    try:
        found = contracts.check_agent("check-forgetful")
    finally:
        search_agents.remove("check-forgetful")
    assert any("extend state_dict" in line for line in found), found


def test_leap_check_imports_a_module_and_names_each_failure(tmp_path, monkeypatch, capsys):
    (tmp_path / "check_plugin_mod.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert main(["check", "--import", "check_plugin_mod"]) == 1
    finally:
        redundancy_metrics.remove("check-chatty")
    out = capsys.readouterr().out
    assert "[FAIL] metric check-chatty" in out and "host reads" in out and "to_numpy" in out
    assert "0 passed, 1 failed" in out


class Unseeded(SearchAgent):
    """Ignores its seed: draws from one generator seeded once, whatever seed it is given."""

    def __init__(self, space, *, seed=None, **kwargs):
        import numpy as np

        super().__init__(space, seed=seed, **kwargs)
        self.fixed = np.random.default_rng(1234)

    def ask(self, history):
        choice = [int(self.fixed.integers(len(u.actions))) for u in self.space.units]
        return self.space.to_config(choice) if self.space.is_valid(choice) else None


def test_an_agent_that_ignores_its_seed_is_flagged():
    """Issue 54: the check's tests only fed it agents that pass; an agent whose every seed gives one search, while it
    declares itself seeded, is told to draw from self.rng (red when the seed check is skipped)."""
    search_agents.add("check-unseeded", Unseeded)
    try:
        found = contracts.check_agent("check-unseeded")
    finally:
        search_agents.remove("check-unseeded")
    assert any("4 seeds gave 1 distinct searches" in line and "self.rng" in line for line in found), found


# ---------------------------------------------------------------- leap.testing's classes, as a researcher uses them
from leap.testing import AgentContract, DrafterContract, MetricContract  # noqa: E402


class TestTheRandomAgentThroughLeapTesting(AgentContract):
    agent = "random"


class TestTheCosineMetricThroughLeapTesting(MetricContract):
    metric = "cosine"


class TestPromptLookupThroughLeapTesting(DrafterContract):
    drafter = "prompt-lookup"


def test_a_contract_class_fails_an_agent_that_breaks_the_contract():
    search_agents.add("check-unseeded-class", Unseeded)
    try:
        contract = AgentContract()
        contract.agent = "check-unseeded-class"
        with pytest.raises(AssertionError, match="4 seeds gave 1 distinct searches"):
            contract.test_agent_contract()
    finally:
        search_agents.remove("check-unseeded-class")
