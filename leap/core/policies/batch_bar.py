"""The bar of the batch at hand: plain decoding's goodput, against which every drafting arm is judged, measured in
each batch rather than carried from an earlier one - in every batch (``on=True``), or only while the run's drafting
is undecided (a margin, ``on=0.2``: the batch search's default, :class:`~leap.search.batch.BatchSearch`; a fixed
drafter's cap bandit carries its bar, ``on=False``).

A run's cap bandits are kept across its batches, one per row count
(:meth:`~leap.core.decoding.batch.BatchDecoder.policy`), and so was their bar: plain's last pulls, made whenever
``refresh`` came due (:class:`~leap.core.policies.batch_caps.GoodputBandit`). But what a plain step costs is the
batch's own - every step attends over the batch's longest prompt: on Spec-Bench at B = 8 on the AMD EPYC, ``ar``'s
steps took 70 to 114 ms a batch (``docs/data/regret-amd-03f010e/b8-t0``) - and a bandit of fewer rows, first met at a
batch's tail, inherited the bar of the full rows it was seeded from. In that run the search from the prior judged
nine of its ten batches, at every row count, by one bar of 94 ms a step made of three pulls in its first batch, while
``ar`` ran at 70 to 92 ms a step in nine of the ten (``experiments/2026-12-03-batch-bar``). Over the AMD EPYC's B = 8
records the carried bar read a plain step 8 to 16% dearer than ``ar``'s steps in the same batch at every row count
(sd 14 to 25% a batch), and the search drafts most in a batch's tail, at fewer rows, where its tally read its drafting
1.11 to 1.17 times plain decoding against 0.97 to 1.00 at ``ar``'s steps
(``experiments/2026-12-07-bar-where-it-decides``).

So at a batch's start :class:`BatchBar` makes the bar again: the bandit of its first row count forgets plain's last
pulls and owes :attr:`~leap.core.policies.batch_caps.GoodputBandit.REFRESH_PULLS` new ones
(:meth:`~leap.core.policies.batch_caps.GoodputBandit.rebar`); a bandit of another row count, first met later in the
batch, takes that bar scaled by the cost model - a plain step at ``r`` rows against one at the measured count,
:meth:`~leap.core.runtime.costs.Calibration.verify_rows` at one token a row - with no plain step spent. Without a
calibration (the screen off) it keeps its own. The refresh still runs within a batch. What the decoder's
:attr:`~leap.core.decoding.batch.BatchDecoder.tally` counts a drafting step's tokens at is the bar of its row count,
so the tally judges each batch against that batch's plain steps too.

**Where the bar can decide** (a margin ``m``): three plain pulls cost a batch of 20 to 28 steps a tenth of its steps
where drafting pays 1.4 times - made in every batch (``on=True``) the search was no faster, 0.98 [0.95, 1.01] of
itself with the bar carried, pooled over B = 4 and 8 (``experiments/2026-12-03-batch-bar``). The bar only matters
where drafting's lead is within its error, so a batch makes it again only while the run's drafting, all in, has not
led plain decoding by ``1 + m`` (:meth:`begin`'s ``lead``: the decoder's tally over the drafters in play; a run with
nothing counted yet is undecided). At the default ``m = 0.2``, about the carried bar's error above, on the AMD EPYC
(``bash experiments/2026-12-07-bar-where-it-decides/ablation.sh OUT`` at ``56c1386``, the carried bar beside it): at
B = 8 the search from an empty memory went from 0.92 [0.87, 0.97] of plain decoding to 1.01 [0.98, 1.04] (paired by
batch, carried over made: 0.91 [0.86, 0.95]; made in every batch 1.02 and 1.03 in two other runs, carried 0.91 to 0.93
in this session's three), from the prior 0.98 to 1.00; at B = 4 level at T = 0 from both starts and at T = 1 in two
runs but one, where from the prior it kept ``cascade`` rather than ``lowbit`` (the kin toss,
``experiments/2026-12-02-kin-noise``); pooled over 120 batches, carried over made 1.01 [0.99, 1.03].

Who calls what: :meth:`BatchDecoder.generate <leap.core.decoding.batch.BatchDecoder.generate>` calls :meth:`begin`
before a batch and :meth:`prepare` with each step's cap policy before it chooses.
"""

from __future__ import annotations

from collections.abc import Callable

from leap.core.errors import SettingsError
from leap.core.policies.batch_caps import GoodputBandit

__all__ = ["BatchBar"]


class BatchBar:
    """Makes each cap bandit's bar again once a batch (module docstring).

    Args:
        verify_cost: ``rows ->`` the batch's cost model at that many rows (``q ->`` a forward of ``q`` tokens a row,
            :meth:`BatchDecoder._verify_cost <leap.core.decoding.batch.BatchDecoder._verify_cost>`), or None without
            a calibration: a row count met after the batch's first keeps its own bar.
        on: True: in every batch; a margin ``m > 0``: only in a batch that starts while the run's drafting is
            undecided - its all-in speedup over plain decoding (:meth:`begin`'s ``lead``) not yet counted or below
            ``1 + m`` (module docstring: where the bar can decide); False: never (each bandit's bar carried across
            batches).
    """

    def __init__(self, verify_cost: Callable[[int], Callable[[int], float] | None], *,
                 on: bool | float = True) -> None:
        if not isinstance(on, bool) and not float(on) > 0:
            raise SettingsError(f"batch_bar is true, false or a margin > 0 (made again while drafting's all-in "
                                f"lead over plain decoding is below 1 + margin), got {on!r}")
        self.verify_cost = verify_cost
        self.on: bool | float = on if isinstance(on, bool) else float(on)
        self.now = False  #: whether this batch makes its bar again
        self._made: set[int] = set()  # the row counts whose bar this batch has made
        self._source = None  # (rows, policy): the bandit whose pulls measure this batch's bar
        self.measured: tuple[int, float] | None = None  #: this batch's bar: (rows, a plain step's seconds)

    def begin(self, lead: float | None = None) -> bool:
        """A new batch: every bar is made again as its row count is met, if :attr:`on` says so for a run whose
        drafting so far gave ``lead`` times plain decoding, all in (None: no drafting step counted yet). Returns
        :attr:`now`."""
        self._made, self._source, self.measured = set(), None, None
        margin = self.on
        self.now = margin is True or (margin is not False and (lead is None or lead < 1.0 + margin))
        return self.now

    def prepare(self, policy, rows: int) -> None:
        """Before ``policy`` (the cap policy of ``rows`` rows) chooses this batch's step: the first time this batch
        meets ``rows``, make its bar (module docstring). A fixed cap has none."""
        if not self.now or not isinstance(policy, GoodputBandit):
            return
        if self.measured is None and self._source is not None:
            seconds = self._source[1].bar_seconds()
            if seconds is not None:
                self.measured = (self._source[0], seconds)
        if rows in self._made:
            return
        self._made.add(rows)
        if self._source is None:  # the batch's first row count: its bar measured now
            policy.rebar(None)
            self._source = (rows, policy)
            return
        scale = self._scale(rows)
        if scale is not None:  # else (no cost model, or met before the bar was measured) its own bar stands
            policy.rebar(self.measured[1] * scale)

    def _scale(self, rows: int) -> float | None:
        """A plain step at ``rows`` rows against one at the measured bar's, by the cost model (None: no bar measured
        in this batch yet, or no cost model)."""
        if self.measured is None:
            return None
        at, measured_at = self.verify_cost(rows), self.verify_cost(self.measured[0])
        if at is None or measured_at is None:
            return None
        return at(1) / max(measured_at(1), 1e-12)
