"""Each batch's bar is its own: plain decoding measured at the batch's start, and scaled by the cost model for the
row counts met later in it (leap.core.policies.batch_bar)."""

from __future__ import annotations

import pytest

from leap.core.policies.batch_bar import BatchBar
from leap.core.policies.batch_caps import GoodputBandit


def _cost_model(per_row: float):
    """``rows -> (q -> cost)``: a forward's cost as a fixed part plus ``per_row`` a row-token."""
    return lambda rows: (lambda q: 1.0 + per_row * rows * q)


def _batch(bar: BatchBar, bandit: GoodputBandit, plain_s: float, draft_s: float, steps: int = 20) -> list:
    """One batch of ``steps`` steps at 8 rows: a plain step takes ``plain_s``, the drafting arm (cap 4) commits two
    tokens a row in ``draft_s``; the arms the bandit pulled, in order."""
    bar.begin()
    pulls = []
    for _ in range(steps):
        bar.prepare(bandit, 8)
        arm = bandit.choose()
        pulls.append(arm)
        bandit.update(arm, committed=2.0 if arm else 1.0, seconds=draft_s if arm else plain_s)
    return pulls


@pytest.mark.parametrize("on", [True, False])
def test_each_batch_judges_drafting_against_its_own_plain_steps(on):
    """A first batch of long prompts (plain 0.2 s a step, drafting two tokens in 0.3 s: 1.33 times plain) and a second
    of short ones (plain 0.1 s, drafting 0.25 s: 0.8 of plain). With the bar of each batch the second starts with
    three plain pulls and leaves drafting; carried from the first (``on=False``), the bar of 5 tokens a second makes
    the losing arm look 1.6 times plain for the whole batch. Red when :meth:`GoodputBandit.rebar` does nothing or owes
    no pulls."""
    bar = BatchBar(_cost_model(0.1), on=on)
    bandit = GoodputBandit((0, 4), refresh=32)
    first = _batch(bar, bandit, plain_s=0.2, draft_s=0.3)
    assert first[-10:].count(4) >= 8  # drafting paid there
    second = _batch(bar, bandit, plain_s=0.1, draft_s=0.25)
    if on:
        assert second[:3] == [0, 0, 0]
        assert bandit.bar_seconds() == pytest.approx(0.1)
        assert second[-10:].count(0) >= 8
    else:
        assert bandit.bar_seconds() == pytest.approx(0.2)
        assert second[-10:].count(4) >= 8  # the stale bar: the losing arm for the batch


def test_a_row_count_met_later_takes_the_batchs_bar_scaled_by_the_cost_model_without_a_plain_step():
    """The bar measured at 8 rows (0.1 s a step), a row count first met later in the batch (4 rows) stands on it
    scaled by the cost model - (1 + 0.1 x 4) / (1 + 0.1 x 8) of it - and spends no plain step; without a cost model
    it keeps its own bar. Red when the scale is left out or inverted, or when the later row count owes pulls."""
    bar = BatchBar(_cost_model(0.1))
    full, tail = GoodputBandit((0, 4), refresh=32), GoodputBandit((0, 4), refresh=32)
    for _ in range(3):
        tail.update(0, committed=1.0, seconds=0.5)  # its bar from an earlier batch: 0.5 s a step
    bar.begin()
    for _ in range(3):
        bar.prepare(full, 8)
        full.update(full.choose(), committed=1.0, seconds=0.1)
    pulled = tail.counts[:]
    bar.prepare(tail, 4)
    assert bar.measured == (8, pytest.approx(0.1))
    assert tail.bar_seconds() == pytest.approx(0.1 * 1.4 / 1.8)
    assert tail.counts == pulled and not tail._owed  # no plain step spent on it
    bar.prepare(tail, 4)  # once a batch
    assert tail.bar_seconds() == pytest.approx(0.1 * 1.4 / 1.8)

    blind = BatchBar(lambda rows: None)
    other = GoodputBandit((0, 4), refresh=32)
    for _ in range(3):
        other.update(0, committed=1.0, seconds=0.5)
    blind.begin()
    for _ in range(3):
        blind.prepare(full, 8)
        full.update(full.choose(), committed=1.0, seconds=0.1)
    blind.prepare(other, 4)
    assert other.bar_seconds() == pytest.approx(0.5) and not other._owed


def test_a_fixed_cap_has_no_bar_and_a_bar_off_makes_nothing_again():
    from leap.core.policies.batch_caps import FixedCap

    bar = BatchBar(_cost_model(0.1))
    bar.begin()
    bar.prepare(FixedCap(4), 8)  # nothing to make
    assert bar.measured is None
    off = BatchBar(_cost_model(0.1), on=False)
    bandit = GoodputBandit((0, 4), refresh=32)
    bandit.update(0, committed=1.0, seconds=0.3)
    off.begin()
    off.prepare(bandit, 8)
    assert not bandit._owed and bandit.bar_seconds() == pytest.approx(0.3)


def test_owed_pulls_are_paid_with_the_refresh_off():
    """A bar made again owes three plain pulls even where the refresh is off (``refresh=0``), and then drafting goes
    on: red when the owed pulls are counted down only with the refresh on (plain for good)."""
    bandit = GoodputBandit((0, 4), refresh=0)
    for arm in (0, 4, 4):
        bandit.update(arm, committed=2.0 if arm else 1.0, seconds=0.1)
    bandit.rebar(None)
    pulls = []
    for _ in range(10):
        arm = bandit.choose()
        pulls.append(arm)
        bandit.update(arm, committed=2.0 if arm else 1.0, seconds=0.1)
    assert pulls[:3] == [0, 0, 0] and pulls[3:].count(4) >= 6


@pytest.mark.parametrize("lead, made", [(None, True), (0.7, True), (1.19, True), (1.21, False), (1.6, False)])
def test_a_margin_makes_the_bar_again_only_while_drafting_is_undecided(lead, made):
    """``on=0.2``: a batch makes its bar again while the run's drafting, all in, has not led plain decoding by a fifth
    (``lead`` None: nothing counted yet); past that it keeps the carried bar and spends no plain step. Red when the
    margin is ignored (every batch, or none), compared the wrong way, or the uncounted run is taken as decided."""
    bar = BatchBar(_cost_model(0.1), on=0.2)
    bandit = GoodputBandit((0, 4), refresh=32)
    for arm in (0, 4, 4):
        bandit.update(arm, committed=2.0 if arm else 1.0, seconds=0.3)
    assert bar.begin(lead) is made and bar.now is made
    bar.prepare(bandit, 8)
    assert bandit._owed == (GoodputBandit.REFRESH_PULLS if made else 0)
    assert bandit.bar_seconds() == (None if made else pytest.approx(0.3))


@pytest.mark.parametrize("on", [0, -0.1, 0.0])
def test_a_margin_must_be_positive(on):
    from leap.core.errors import SettingsError

    with pytest.raises(SettingsError, match="margin > 0"):
        BatchBar(_cost_model(0.1), on=on)
    assert BatchBar(_cost_model(0.1), on=True).begin(5.0) and not BatchBar(_cost_model(0.1), on=False).begin(None)
