"""The run's all-in drafting tally and the batches' loss budget (:mod:`leap.core.policies.loss_budget`).

How :class:`~leap.core.decoding.batch.BatchDecoder` wires them into a batch is its test's
(``tests/core/decoding/test_batch.py``); here, what each one decides from the numbers it is told.
"""

from __future__ import annotations

from types import SimpleNamespace

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
