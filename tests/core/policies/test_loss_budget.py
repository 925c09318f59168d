"""The run's all-in drafting tally and the batches' loss budget (:mod:`leap.core.policies.loss_budget`).

How :class:`~leap.core.decoding.batch.BatchDecoder` wires them into a batch is its test's
(``tests/core/decoding/test_batch.py``); here, what each one decides from the numbers it is told.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from leap.core.policies.loss_budget import DraftingTally, LossBudget


def _outcome(steps, laggard=False):
    """A batch's step record: ``steps`` is ``(cap, drafter, rows, committed, seconds)`` per step; each step worth its
    tokens a row, or with ``laggard`` a made-up number of its own (as the laggard's progress is), so that reading the
    tokens for the worth shows."""
    caps, drafters, rows, committed, seconds = (list(c) for c in zip(*steps)) if steps else ([], [], [], [], [])
    worth = [1 + c % 3 for c in committed] if laggard else [c / n for c, n in zip(committed, rows)]
    return SimpleNamespace(caps=caps, drafters=drafters, step_rows=rows, step_committed=committed, step_s=seconds,
                           step_worth=worth)


_steps = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2), st.integers(1, 8), st.integers(1, 40),
                            st.floats(0.001, 2.0, allow_nan=False)), max_size=12)


@given(batches=st.lists(_steps, min_size=1, max_size=4), rate=st.floats(1.0, 100.0))
def test_the_tally_adds_up_every_drafting_step_of_every_batch_and_no_plain_one(batches, rate):
    """Over any batches: the tally's seconds are its drafting steps' (cap > 0) seconds, all of them, its plain time
    their tokens a row at plain's rate, and it has lost exactly when the first exceeds the second; per drafter the
    same, its speedup plain's time over its own, and over any set of drafters whether theirs lost. Red when plain
    steps are counted, a batch replaces the last, a step's tokens are not taken a row, or a step is put down to another
    drafter or set."""
    tally = DraftingTally()
    for steps in batches:
        tally.add(_outcome(steps), lambda rows: rate)
    drafting = [s for steps in batches for s in steps if s[0]]
    assert tally.seconds == pytest.approx(sum(s[4] for s in drafting))
    assert tally.plain_s == pytest.approx(sum(s[3] / s[2] / rate for s in drafting))
    assert tally.lost == (tally.seconds > tally.plain_s > 0)
    for drafter in range(3):
        mine = [s for s in drafting if s[1] == drafter]
        expected = sum(s[3] / s[2] / rate for s in mine) / sum(s[4] for s in mine) if mine else None
        assert tally.speedup(drafter) == (pytest.approx(expected) if mine else None)
    laggard = DraftingTally()  # each step at its worth (here not its tokens a row: the laggard's progress)
    for steps in batches:
        laggard.add(_outcome(steps, laggard=True), lambda rows: rate)
    assert laggard.seconds == pytest.approx(tally.seconds)
    assert laggard.plain_s == pytest.approx(sum((1 + s[3] % 3) / rate for s in drafting))
    for among in ({0}, {1, 2}, {0, 1, 2}, set()):  # the drafters in play's steps alone
        mine = [s for s in drafting if s[1] in among]
        seconds, plain_s = sum(s[4] for s in mine), sum(s[3] / s[2] / rate for s in mine)
        if abs(seconds - plain_s) > 1e-9 * (seconds + plain_s):  # not a tie that rounding decides
            assert tally.lost_among(among) == (seconds > plain_s > 0)


def test_the_tally_leaves_out_steps_at_a_row_count_whose_plain_step_is_unmeasured_and_clears():
    tally = DraftingTally()
    assert not tally.lost  # nothing drafted: nothing lost
    rates = {4: 10.0}  # 4 rows: 10 tokens a row a second; 2 rows: never measured
    tally.add(_outcome([(2, 0, 4, 8, 0.5), (2, 1, 2, 4, 60.0)]), rates.get)
    assert tally.seconds == pytest.approx(0.5) and tally.plain_s == pytest.approx(0.2) and tally.lost
    assert tally.speedup(0) == pytest.approx(0.4) and tally.speedup(1) is None
    tally.clear()
    assert not tally.lost and tally.seconds == tally.plain_s == 0.0 and tally.speedup(0) is None


def test_a_batch_that_spends_its_budget_decodes_plainly_and_a_streak_skips_1_2_4_batches():
    """At 5% of 40 plain steps of 0.1 s (0.2 s), steps losing 0.06 s each spend it at the fourth; the batch decodes
    plainly from there, and after n such batches in a row the next 2 ** (n - 1) are skipped whole. Red when the
    streak does not double, the skips are not counted down, or a batch's loss is kept into the next."""
    budget = LossBudget(0.05)
    skipped = []
    for _ in range(12):
        if budget.begin(40):
            skipped.append(True)
            budget.end()
            continue
        skipped.append(False)
        offs = [budget.step(0.16, 1.0, 10.0, pays=False) for _ in range(6)]  # 0.16 s for a plain step's token
        assert offs == [False] * 3 + [True] * 3  # 0.06 s lost a step: over 0.2 s at the fourth
        budget.end()
    assert skipped == [False, True, False, True, True, False, True, True, True, True, False, True]


def test_once_something_pays_the_budget_stops_and_the_streak_ends():
    budget = LossBudget(0.05)
    budget.begin(40)
    budget.step(0.4, 1.0, 10.0, pays=False)
    assert budget.off  # 0.3 s lost beyond plain's 0.1: over the 0.2 s budget
    budget.end()
    assert budget.fruitless == 1 and budget.skips_left == 1
    assert budget.begin(40)  # skipped
    budget.end()
    assert not budget.begin(40)
    assert not budget.step(0.1, 1.0, 10.0, pays=True)  # pays: nothing is counted from here on
    assert not budget.step(5.0, 1.0, 10.0, pays=False)
    budget.end()
    assert budget.fruitless == 0 and budget.skips_left == 0


def test_a_batch_too_short_for_one_plain_steps_loss_is_not_judged_and_forget_ends_the_streak():
    budget = LossBudget(0.03)
    budget.begin(16)  # 0.48 of a plain step: a warm-up
    assert budget.step(1.0, 1.0, 10.0, pays=False)  # it trips within the batch ...
    budget.end()
    assert budget.fruitless == 0 and not budget.begin(128)  # ... but starts no streak
    budget.step(10.0, 1.0, 10.0, pays=False)
    budget.end()
    assert budget.skips_left == 1
    budget.forget()
    assert not budget.begin(128) and budget.fruitless == 0
    with pytest.raises(ValueError, match="share"):
        LossBudget(0.0)


def _tally_of(steps_by_drafter):
    """A tally told each drafter's steps, ``(seconds, plain seconds for its tokens)`` each, at a plain rate of one."""
    tally = DraftingTally()
    for drafter, steps in steps_by_drafter.items():
        tally.add(_outcome([(2, drafter, 1, plain_s, seconds) for seconds, plain_s in steps]), lambda rows: 1.0)
    return tally


def _draws(rng, n, ratio, noise=0.3):
    """``n`` steps of a drafter whose speedup is ``ratio``: seconds spread over 0.2-0.6, tokens noisy around it."""
    seconds = rng.uniform(0.2, 0.6, n)
    return list(zip(seconds, ratio * seconds * rng.lognormal(0.0, noise, n)))


@given(steps=st.lists(st.tuples(st.floats(0.01, 2.0), st.floats(0.01, 2.0)), min_size=1, max_size=20))
def test_a_drafter_is_never_below_itself_nor_below_one_with_fewer_than_two_steps(steps):
    """Whatever the steps: a drafter whose steps are another's is not below it, and neither is below a drafter (nor a
    drafter below it) until both have two counted steps. Red when a tie counts as below (a shortfall of zero against a
    spread of zero) or a drafter with one step is judged (measured by planting each)."""
    exact = [(seconds, 1.2 * seconds) for seconds, _ in steps]  # no spread at all: a tie is a tie
    tally = _tally_of({0: steps, 1: steps, 2: steps[:1], 3: exact, 4: exact})
    assert not tally.below(0, 1) and not tally.below(1, 0) and not tally.below(3, 4)
    assert not tally.below(2, 0) and not tally.below(0, 2)  # one step: no spread to judge by
    assert not tally.below(0, 5) and not tally.below(5, 0)  # never counted


def test_below_holds_its_confidence_when_two_drafters_are_level_and_sees_a_true_gap():
    """Two drafters of the same speedup (1.0) and noisy steps: at 0.95 (two-sided) the tally calls one below the other
    in about 2.5% of 400 runs of 12 steps each, and of 3 steps each (at most 5%, three binomial deviations above; the
    point estimates call it in half); one at 0.75 of the other is called below in most runs of 30 steps each, and at
    ``share`` 0.7 the same gap is not. Red when the quantile is left out, the standard error halved, the quantile the
    normal's at 3 steps (8.5% there), or ``share`` does not scale the bar (measured by planting each)."""
    rng = np.random.default_rng(0)
    level = [_tally_of({0: _draws(rng, 12, 1.0), 1: _draws(rng, 12, 1.0)}) for _ in range(400)]
    false_alarms = sum(t.below(0, 1) for t in level) / len(level)
    assert false_alarms <= 0.05
    assert sum(t.speedup(0) < t.speedup(1) for t in level) / len(level) > 0.4  # the point estimates' coin toss
    few = [_tally_of({0: _draws(rng, 3, 1.0), 1: _draws(rng, 3, 1.0)}) for _ in range(400)]
    assert sum(t.below(0, 1) for t in few) / len(few) <= 0.05
    gap = [_tally_of({0: _draws(rng, 30, 0.75), 1: _draws(rng, 30, 1.0)}) for _ in range(100)]
    assert sum(t.below(0, 1) for t in gap) / len(gap) >= 0.9
    assert sum(t.below(0, 1, share=0.7) for t in gap) / len(gap) <= 0.1
    cleared = gap[0]
    cleared.clear()
    assert not cleared.below(0, 1) and cleared.moments == {}


def _tally_by_rows(strata, rng):
    """A tally told, per drafter, ``(rows, steps, speedup)`` strata: ``steps`` noisy steps at ``rows`` rows whose plain
    seconds are ``speedup`` times theirs (:func:`_draws`), at a plain rate of one token a row a second."""
    tally = DraftingTally()
    for drafter, parts in strata.items():
        steps = [(2, drafter, rows, plain_s * rows, seconds) for rows, n, speedup in parts
                 for seconds, plain_s in _draws(rng, n, speedup)]
        tally.add(_outcome(steps), lambda rows: 1.0)
    return tally


def test_below_by_rows_compares_the_drafters_at_one_mix_of_row_counts():
    """Two drafters level at every row count (1.0 at four rows, 2.0 at one), one with most of its steps at one row (a
    batch's tail): pooled over rows it reads ahead and ``below`` calls the other below it in most of 400 runs (80%),
    while ``by_rows`` calls either below the other in about 5% (0.95, two-sided; 5.75% measured: at most 8%, three
    binomial deviations above 5% less one); with three steps of each at each row count, one direction in at most 5%; one
    at 0.7 of the other at both row counts is called below by rows in most runs, whatever its mix, and never the other
    way; a drafter with fewer than two steps at every row count where the other has two is not judged. Red when
    ``by_rows`` pools the strata, weights each drafter by its own mix, or the degrees of freedom are the normal's
    (measured by planting each)."""
    rng = np.random.default_rng(1)
    level = [_tally_by_rows({0: [(4, 20, 1.0), (1, 3, 2.0)], 1: [(4, 8, 1.0), (1, 14, 2.0)]}, rng) for _ in range(400)]
    assert sum(t.below(0, 1) for t in level) / len(level) > 0.5  # the pooled reading: the mix decides
    assert sum(t.below(0, 1, by_rows=True) or t.below(1, 0, by_rows=True) for t in level) / len(level) <= 0.08
    few = [_tally_by_rows({0: [(4, 3, 1.0), (1, 3, 2.0)], 1: [(4, 3, 1.0), (1, 3, 2.0)]}, rng) for _ in range(400)]
    assert sum(t.below(0, 1, by_rows=True) for t in few) / len(few) <= 0.05
    gap = [_tally_by_rows({0: [(4, 30, 0.7), (1, 5, 1.4)], 1: [(4, 20, 1.0), (1, 30, 2.0)]}, rng) for _ in range(100)]
    assert sum(t.below(0, 1, by_rows=True) for t in gap) / len(gap) >= 0.9
    assert not any(t.below(1, 0, by_rows=True) for t in gap)
    lone = _tally_by_rows({0: [(4, 1, 0.5), (1, 1, 0.5), (2, 6, 1.0)], 1: [(4, 9, 2.0), (1, 9, 2.0)]}, rng)
    assert not lone.below(0, 1, by_rows=True) and lone.below(0, 1)
    lone.clear()
    assert lone.strata == {}


@given(steps=st.lists(st.tuples(st.floats(0.01, 2.0), st.floats(0.01, 2.0)), min_size=2, max_size=20),
       rows=st.integers(1, 8), share=st.floats(0.5, 1.0))
def test_below_by_rows_is_the_pooled_test_at_one_row_count(steps, rows, share):
    """Whatever the steps, where every step of both drafters is at one row count the comparison by rows is the pooled
    one. Red when the standardised estimate or its degrees of freedom part from the pooled ones there."""
    tally = DraftingTally()
    half = len(steps) // 2 or 1
    tally.add(_outcome([(2, d, rows, g * rows, s) for d, part in ((0, steps[:half]), (1, steps[half:]))
                        for s, g in part]), lambda r: 1.0)
    for a, b in ((0, 1), (1, 0)):
        assert tally.below(a, b, share, by_rows=True) == tally.below(a, b, share)


def test_paid_among_beyond_noise_holds_its_confidence_and_sees_a_true_gain():
    """``paid_among(drafters, 0.95)``: drafting level with plain decoding (speedup 1.0, noisy steps) is called paid in
    about 2.5% of 400 runs of 30 steps (at most 5%; the point estimate, ``confidence=None``, calls it paid in about
    half: drafting went on at a loss so); a true 1.3 is called paid in most runs of 30 steps. Steps pool over the
    drafters named; fewer than two counted steps leave the bandit's word standing (True). Red when the quantile is
    left out, the standard error is taken per step rather than over their sum, or one step is judged (each planted)."""
    rng = np.random.default_rng(1)
    unbiased = np.exp(-0.3 ** 2 / 2)  # _draws' lognormal noise has mean exp(0.045): this speedup is 1.0 on average
    level = [_tally_of({0: _draws(rng, 30, unbiased)}) for _ in range(400)]
    assert sum(t.paid_among({0}, 0.95) for t in level) / len(level) <= 0.05
    assert 0.3 < sum(t.paid_among({0}) for t in level) / len(level) < 0.7  # the point estimate: a coin's toss
    assert all(t.paid_among({0}) == (not t.lost_among({0})) for t in level)
    gain = [_tally_of({0: _draws(rng, 30, 1.3 * unbiased)}) for _ in range(100)]
    assert sum(t.paid_among({0}, 0.95) for t in gain) / len(gain) >= 0.9
    pooled = _tally_of({0: _draws(rng, 30, 1.3 * unbiased), 1: [(1.0, 0.2)] * 30})  # one that pays, one that loses badly
    assert pooled.paid_among({0}, 0.95) and not pooled.paid_among({0, 1}, 0.95) and not pooled.paid_among({1})
    one = _tally_of({0: [(0.1, 0.05)]})  # one counted step (losing): too few to judge beyond noise
    assert one.paid_among({0}, 0.95) and not one.paid_among({0}) and DraftingTally().paid_among({0}, 0.95)
