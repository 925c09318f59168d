"""Contract every registered draft policy passes, plus each policy's own rule."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from leap.core.errors import SettingsError
from tests.costs import fake_costs
from leap.core.policies.base import AdaEDL, AdaptiveConfidence, ConfidenceThreshold, FixedLength, draft_policies, make_policy


def _probs(top: float, V: int = 10) -> torch.Tensor:
    rest = (1 - top) / (V - 1)
    return torch.tensor([top] + [rest] * (V - 1))


@pytest.mark.parametrize("name", draft_policies.names())
@given(tops=st.lists(st.floats(0.1, 1.0), min_size=1, max_size=40), accepted=st.integers(0, 40))
def test_every_policy_stops_by_max_draft_and_takes_feedback(name, tops, accepted):
    policy = make_policy(name, max_draft=5) if name != "fixed" else make_policy(name, k=5)
    if policy.needs_costs:
        policy.use_costs(fake_costs(), passes_per_token=4)
    policy.begin()
    drafted, stopped = 0, False
    for top in tops:
        drafted += 1
        if policy.should_stop(drafted, _probs(top)):
            stopped = True
            break
    assert drafted <= 5  # never beyond max_draft, whatever the confidences
    assert stopped or drafted == len(tops)
    policy.feedback(drafted, min(accepted, drafted))
    json.dumps(policy.state())  # reported in outcome records: must be JSON
    assert policy.should_stop(5, _probs(1.0))


def test_fixed_drafts_k():
    policy = FixedLength(k=3)
    assert [policy.should_stop(i, _probs(0.01)) for i in (1, 2, 3)] == [False, False, True]


def test_confidence_stops_on_low_probability():
    policy = ConfidenceThreshold(threshold=0.8, max_draft=10)
    assert not policy.should_stop(1, _probs(0.9))
    assert policy.should_stop(1, _probs(0.5))
    with pytest.raises(SettingsError):
        ConfidenceThreshold(threshold=1.5)


def test_adaptive_confidence_raises_threshold_when_acceptance_is_low():
    policy = AdaptiveConfidence(threshold=0.6)
    for _ in range(20):
        policy.feedback(4, 0)
    assert policy.threshold > 0.6
    high = AdaptiveConfidence(threshold=0.6)
    for _ in range(20):
        high.feedback(4, 4)
    assert high.threshold < 0.6


def test_adaedl_stops_on_high_entropy_and_adapts_lambda():
    policy = AdaEDL(lam=0.4)
    assert not policy.should_stop(1, _probs(0.999))
    assert policy.should_stop(1, torch.full((1000,), 1e-3))  # uniform: entropy ln(1000)
    lam = policy.lam
    for _ in range(10):
        policy.feedback(4, 0)
    assert policy.lam > lam


def test_bad_max_draft():
    with pytest.raises(SettingsError, match="max_draft"):
        FixedLength(k=0)


def test_bandit_tries_every_arm_then_prefers_the_best_paying_one():
    from leap.core.policies.bandit import BanditPolicy

    bandit = BanditPolicy(c=0.1)
    chosen = []
    for _ in range(30):
        bandit.use_costs(fake_costs(), passes_per_token=4)
        bandit.begin()
        chosen.append(bandit.current)
        # arm 1 (fixed k=4) always gets its 4 tokens accepted; the others get nothing
        bandit.feedback(4, 4 if bandit.current == 1 else 0)
    assert sorted(chosen[:5]) == [0, 1, 2, 3, 4]  # each arm once first
    assert chosen[5:].count(1) >= 20
    state = bandit.state()
    assert state["counts"][1] == max(state["counts"]) and state["arms"][1] == "fixed k=4"
    with pytest.raises(SettingsError):
        BanditPolicy(arms=["bandit"])


def test_bandit_reward_is_tokens_per_calibrated_cost():
    from leap.core.policies.bandit import BanditPolicy

    costs = fake_costs()
    bandit = BanditPolicy(arms=["fixed"])
    bandit.use_costs(costs, passes_per_token=4)
    bandit.begin()
    bandit.feedback(3, 2)
    expected = 3 / (costs.verify(4) + 3 * costs.draft_token(4))
    assert bandit.state()["mean_reward"][0] == pytest.approx(expected)
    without = BanditPolicy(arms=["fixed"])
    without.begin()
    with pytest.raises(RuntimeError, match="use_costs"):
        without.feedback(3, 2)
