"""The plug-in contracts for a researcher's own pytest, as ``optuna.testing`` ships Optuna's sampler tests: subclass
one class per plug-in, name what you registered, and pytest runs the same contract leap's own suite and
``leap check --import`` run (:mod:`leap.testing.contracts`)::

    # tests/test_my_agent.py
    import my_agents  # registers "random-skip"
    from leap.testing import AgentContract

    class TestRandomSkip(AgentContract):
        agent = "random-skip"

Agents are checked on a synthetic search space (milliseconds); metrics and drafters on a random 8-layer Llama
built in memory once per test class.
"""

from __future__ import annotations

from leap.testing.contracts import check_agent, check_drafter, check_metric, contract_model

__all__ = ["AgentContract", "MetricContract", "DrafterContract", "check_agent", "check_metric", "check_drafter",
           "contract_model"]


def _fail_on(problems: list[str]) -> None:
    assert not problems, "\n".join(problems)


class AgentContract:
    """Set ``agent`` to a registered search agent's name: proposals inside the space, seeds that repeat and differ,
    a search that resumes from ``state_dict``, ``best()`` among the tried configurations."""

    agent: str = ""

    def test_agent_contract(self) -> None:
        _fail_on(check_agent(self.agent))


class MetricContract:
    """Set ``metric`` to a registered redundancy metric's name: one finite value per layer, one host read."""

    metric: str = ""

    def test_metric_contract(self) -> None:
        _fail_on(check_metric(self.metric, contract_model()))


class DrafterContract:
    """Set ``drafter`` to a registered drafter's name: greedy output identical to plain decoding, within the host
    reads it declares."""

    drafter: str = ""

    def test_drafter_contract(self) -> None:
        _fail_on(check_drafter(self.drafter, contract_model()))
