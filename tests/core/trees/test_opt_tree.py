"""OPT-Tree's budget by expected acceptance (leap.core.trees.opt_tree) under a calibrated cost curve."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from leap.core.runtime.costs import Calibration
from leap.core.trees.draft_tree import best_first_tree
from leap.core.drafters import make_drafter
from leap.core.errors import SettingsError
from leap.core.trees.opt_tree import budget_by_expected_acceptance, expected_speed, opt_tree


def _costs(slope: float, k: int = 16) -> Calibration:
    return Calibration(key={}, step_s=1.0, verify_curve={i: 1.0 + slope * (i - 1) for i in range(1, k + 1)},
                       layer_cost=0.0, head_cost=0.0)


scores = st.lists(st.floats(0.0, 1.0), max_size=15).map(lambda s: sorted(s, reverse=True))


@given(scores=scores, slope=st.floats(0.0, 0.5), overhead=st.floats(0.0, 0.3))
@example(scores=[0.125], slope=0.0, overhead=0.25)  # the overhead alone makes drafting lose: n = 0
@example(scores=[0.9] * 12, slope=0.0, overhead=0.0)  # a flat curve keeps all 12 (no hidden node cap)
def test_budget_is_the_best_prefix(scores, slope, overhead):
    costs = _costs(slope)
    n = budget_by_expected_acceptance(scores, costs, overhead)
    best = max(expected_speed(scores, m, costs, overhead) for m in range(len(scores) + 1))
    assert expected_speed(scores, n, costs, overhead) == pytest.approx(best, rel=1e-9)


def test_cheaper_verification_grows_the_tree():
    s = [0.9, 0.6, 0.4, 0.3, 0.2, 0.15, 0.1, 0.05]
    flat, cpu, steep = (budget_by_expected_acceptance(s, _costs(slope)) for slope in (0.0, 0.05, 0.4))
    assert flat == len(s) and steep < cpu < flat
    assert budget_by_expected_acceptance([0.01, 0.01], _costs(0.1)) == 0  # not worth drafting at all
    assert budget_by_expected_acceptance([0.125], _costs(0.0), overhead=0.25) == 0  # the drafter's own cost
    assert budget_by_expected_acceptance([0.125], _costs(0.0)) == 1
    assert budget_by_expected_acceptance([0.95] * 40, _costs(0.0)) == 40  # beyond the calibrated curve too


def test_opt_tree_is_a_prefix_of_the_best_first_tree():
    table = {(): [(1, 0.6, (1,)), (2, 0.3, (2,))], (1,): [(3, 0.9, (1, 3))], (2,): [(4, 0.5, (2, 4))],
             (1, 3): [(5, 0.2, (1, 3, 5))]}
    expand = lambda state: table.get(state, [])  # noqa: E731
    full = best_first_tree(expand, (), 10, 5)
    cut = opt_tree(expand, (), max_depth=5, max_nodes=10, costs=_costs(0.2))
    assert 0 < len(cut) < len(full)
    assert cut.tokens == full.tokens[: len(cut)] and cut.parents == full.parents[: len(cut)]
    assert full.scores == sorted(full.scores, reverse=True)


@pytest.mark.parametrize("name", ["stand", "suffix", "token-recycling"])
def test_opt_shaped_drafters_ask_for_costs(name):
    drafter = make_drafter(name, shape="opt")
    assert drafter.needs_costs and drafter.tree_nodes > 1
    drafter.begin([1, 2, 1, 2, 1])
    import torch

    if drafter.needs_logits:
        drafter.observe([1, 2, 1], torch.randn(3, 8, generator=torch.Generator().manual_seed(0)))
    with pytest.raises(SettingsError, match="costs"):
        drafter.propose_tree([1, 2, 1, 2, 1, 2, 1], 4)
    drafter.use_costs(_costs(0.0))
    assert len(drafter.propose_tree([1, 2, 1, 2, 1, 2, 1], 4)) >= 1


# ---------------------------------------------------------------- caps and contexts from the calibration (issue 20)
@pytest.mark.parametrize("name", ["stand", "suffix", "token-recycling", "eagle"])
def test_opt_trees_grow_as_far_as_the_calibrated_curve(name):
    """No constant caps an OPT-Tree: without ``tree_nodes`` the cap is the calibration's ``max_tree_nodes``
    (a flat curve measured to 64 tokens: 63 nodes), and an explicit ``tree_nodes`` wins."""
    kwargs = {"head": "untrained"} if name == "eagle" else {}
    far, near, told = (make_drafter(name, shape="opt", **kwargs) for _ in range(3))
    far.use_costs(_costs(0.0, k=64))
    near.use_costs(_costs(0.0, k=16))
    told = make_drafter(name, shape="opt", tree_nodes=5, **kwargs)
    told.use_costs(_costs(0.0, k=64))
    assert (far.tree_nodes, near.tree_nodes, told.tree_nodes) == (63, 15, 5)


class _Spy(Calibration):
    """Costs that remember the context every verification cost was asked at."""

    def verify(self, tokens, context=None):
        self.asked.append(context)
        return super().verify(tokens, context)


@pytest.mark.parametrize("name", ["stand", "suffix", "token-recycling"])
def test_opt_trees_are_sized_at_the_steps_context(name):
    import torch

    drafter = make_drafter(name, shape="opt")
    costs = _Spy(key={}, step_s=1.0, verify_curve={1: 1.0, 16: 1.0}, layer_cost=0.0, head_cost=0.0)
    costs.asked = []
    drafter.use_costs(costs)
    history = [1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2, 3, 1, 2]
    drafter.begin(history[:6])
    if drafter.needs_logits:
        drafter.observe(history[:8], torch.randn(8, 8, generator=torch.Generator().manual_seed(0)))
    for t in range(7, len(history) + 1):
        drafter.feedback(0, 0)
        drafter.propose_tree(history[:t], 4)
    assert costs.asked and set(costs.asked) <= set(range(7, len(history) + 1)), costs.asked


def test_a_longer_context_shrinks_the_tree_when_verification_gets_dearer():
    scores = [0.9, 0.6, 0.4, 0.3, 0.2, 0.15, 0.1, 0.05]
    costs = Calibration(key={}, step_s=1.0, verify_curve={1: 1.0, 16: 1.0}, layer_cost=0.0, head_cost=0.0,
                        context=128, long_curve={1: 1.0, 16: 7.0}, long_context=2048)
    short, long = (budget_by_expected_acceptance(scores, costs, context=c) for c in (100, 4096))
    assert short == len(scores) and long < short
