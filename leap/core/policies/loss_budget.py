"""Whether drafting pays over a run's batches, every cost counted, and what a batch may lose before it does.

A batch's cap bandit (:class:`~leap.core.policies.batch_caps.GoodputBandit`) values each arm by its own steps, and with
several drafters it leaves a *switch* out of them: a drafter that keeps a context (``lowbit``'s llama.cpp cache) takes
in, when it next drafts, every token committed since it last did, and that step is not its arm's to be judged by
(:class:`~leap.core.decoding.batch.BatchDecoder`'s ``first_step_setup="switch"``). The wall clock pays for it all the
same. Two things here keep that clock in view:

- :class:`DraftingTally`, the run's drafting steps *all in* - their seconds, a drafter's rows begun and its catching up
  included (:attr:`~leap.core.decoding.batch_state.BatchOutcome.step_s`) - against what plain steps would have taken
  for the tokens they committed a row (a plain step's goodput at each step's row count, as the bandit measured it).
  Its :attr:`~DraftingTally.lost` is the run's answer to "has drafting paid here?": at B = 8 on the 2-core Xeon the
  bandit valued ``lowbit`` above plain decoding while its batches ran at 0.84 to 1.09 of plain decoding, catching up
  included (``experiments/2026-11-29-prior-rejoin``), and the tally said so after one batch.
- :class:`LossBudget`, losing cheaply batch by batch, as a single request's search does (:mod:`leap.search.runner`):
  once a batch's drafted steps have cost more than ``share`` of its plain time beyond what plain steps would have
  taken for the same tokens, the rest of the batch decodes plainly, and after ``n`` such batches in a row the next
  ``2 ** (n - 1)`` batches do not draft at all. It is what may be lost *before something pays*: once it pays, the
  budget stops and the bandit alone decides. What "pays" means is the caller's (:meth:`LossBudget.step`'s ``pays``):
  the decoder asks its bandit, and with ``judge_all_in`` (on by default) not while the tally says the drafters in play
  (not retired) have lost, all in - the budget then counts a switch's catching up too. Judging the run's drafting
  whole, it lifted B = 8 on the Xeon from 0.88-0.94 of plain decoding to 0.98-1.00, and sank B = 4 at T = 1 from level
  with ``lowbit-auto`` to 0.92 of it (``experiments/2026-11-29-all-in-budget``); judging the drafters in play, it was
  level at B = 4, T = 1 and lifted B = 8 from the prior (``experiments/2026-11-29-all-in-in-play``).

Who calls what: :meth:`BatchDecoder.generate <leap.core.decoding.batch.BatchDecoder.generate>` holds one of each for the
run (cleared by its ``forget``), tells the budget every step and the tally every batch;
:class:`~leap.search.batch.BatchSearch` reads the tally to let the drafters held on the prior's word join, and its
per-drafter speedups to choose among drafters that share a model state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["DraftingTally", "LossBudget"]


def _ratio(n: float, seconds: float, plain_s: float, ss: float, gg: float, sg: float) -> tuple[float, float]:
    """The ratio estimator ``R = sum g / sum s`` of ``n`` steps (``ss``, ``gg``, ``sg``: their second moments) and its
    variance, the spread of g - R s over sum s (Cochran 1977, chapter 6)."""
    ratio = plain_s / seconds
    residual = max(gg - 2 * ratio * sg + ratio * ratio * ss, 0.0)  # sum of (g - R s)^2
    return ratio, n / (n - 1) * residual / seconds ** 2


class DraftingTally:
    """The run's drafting steps, every cost counted, against plain steps for the same tokens (module docstring)."""

    STRATUM_STEPS = 2  #: the steps of each drafter a row count needs to be compared at (:meth:`below`'s ``by_rows``)

    def __init__(self) -> None:
        self.seconds = 0.0  #: what the drafting steps took, all in
        self.plain_s = 0.0  #: what plain steps would have taken for the tokens they committed a row
        #: the same two per drafter (its index in the decoder's list)
        self.by_drafter: dict[int, list[float]] = {}
        #: per drafter, its counted steps' number and second moments (n, sum s^2, sum g^2, sum s g: s a step's seconds,
        #: g plain steps' seconds for its tokens), for how far :meth:`speedup` can be trusted (:meth:`below`)
        self.moments: dict[int, list[float]] = {}
        #: the same per drafter and row count, ``(drafter, rows) -> [n, sum s, sum g, sum s^2, sum g^2, sum s g]``:
        #: :meth:`below`'s comparison row count by row count (``by_rows``)
        self.strata: dict[tuple[int, int], list[float]] = {}

    def add(self, outcome, plain_rate: Callable[[int], float | None]) -> None:
        """Add a batch's drafting steps (a :class:`~leap.core.decoding.batch_state.BatchOutcome`'s ``caps``,
        ``drafters``, ``step_rows``, ``step_s`` and ``step_worth``); ``plain_rate(rows)``: a plain step's tokens a row
        a second at that many rows (None where not measured: the step is left out). A step is worth what the decoder's
        ``reward`` said (its tokens a row, the laggard's progress, or its tokens a row scaled to the slowest row's
        rate; a plain step: one)."""
        for cap, drafter, rows, seconds, worth in zip(outcome.caps, outcome.drafters, outcome.step_rows,
                                                      outcome.step_s, outcome.step_worth):
            rate = plain_rate(rows) if cap else None
            if rate:
                gain = worth / rate
                self.seconds += seconds
                self.plain_s += gain
                mine = self.by_drafter.setdefault(drafter, [0.0, 0.0])
                mine[0] += seconds
                mine[1] += gain
                spread = self.moments.setdefault(drafter, [0, 0.0, 0.0, 0.0])
                spread[0] += 1
                spread[1] += seconds * seconds
                spread[2] += gain * gain
                spread[3] += seconds * gain
                stratum = self.strata.setdefault((drafter, rows), [0, 0.0, 0.0, 0.0, 0.0, 0.0])
                for i, value in enumerate((1, seconds, gain, seconds * seconds, gain * gain, seconds * gain)):
                    stratum[i] += value

    def speedup(self, drafter: int) -> float | None:
        """What drafter ``drafter``'s steps gave over plain steps, all in (plain steps' seconds for their tokens over
        theirs); None: no counted step yet. Fair between drafters that share a model state (no switch between them
        to catch up: :meth:`~leap.core.decoding.batch.BatchDecoder.kin`), not between others."""
        seconds, plain_s = self.by_drafter.get(drafter, (0.0, 0.0))
        return plain_s / seconds if seconds > 0 else None

    def speedup_among(self, drafters: Iterable[int]) -> float | None:
        """The pooled :meth:`speedup` of ``drafters``' counted steps, all in (None: none counted): what
        :class:`~leap.core.policies.batch_bar.BatchBar` reads to know whether the run's drafting is still undecided."""
        counted = [self.by_drafter[d] for d in set(drafters) if d in self.by_drafter]
        seconds, plain_s = sum(s for s, _ in counted), sum(p for _, p in counted)
        return plain_s / seconds if seconds > 0 and plain_s > 0 else None

    def below(self, drafter: int, other: int, share: float = 1.0, confidence: float = 0.95, *,
              by_rows: bool = False) -> bool:
        """Whether ``drafter``'s :meth:`speedup` is below ``share`` times ``other``'s beyond the noise of their steps:
        by more than Student's t quantile (``confidence``, two-sided; its degrees of freedom Welch-Satterthwaite's
        over the variances' own, each n - 1) times the combined standard error (each ratio's the ratio estimator's:
        the spread of g - R s over sum s, Cochran 1977, chapter 6). False where either has fewer than two counted
        steps. On Spec-Bench at B = 4 and T = 1, ``lowbit``'s and ``cascade``'s speedups after a first batch of 9-16
        steps each stood 0.94 [0.82, 1.05] and 0.99 [0.89, 1.09], 1.56 [1.42, 1.70] and 1.71 [1.36, 2.32] (bootstrap
        intervals, ``docs/data/regret-amd-a4d3b97/b4-t1``, ``experiments/2026-12-02-kin-noise``): which was ahead was
        noise, and the one kept drafted the rest of the run (:class:`~leap.search.batch.BatchSearch`'s
        ``kin_confidence``).

        ``by_rows``: the two compared row count by row count - a stratified ratio (Cochran 1977, 6.10): each
        drafter's speedup at each row count where both have :attr:`STRATUM_STEPS` counted steps or more, weighted alike
        for both (by their steps there together), each row count's variance with its own degrees of freedom (a row
        count of three steps is judged as the three steps it is: 5.75% false alarms in both directions at 0.95,
        ``tests/core/policies/test_loss_budget.py``). A step at fewer
        rows gives far more over plain decoding than one at the batch's full rows (at one row 2 to 3 times, at four
        1.1 to 1.2, ``lowbit`` on Spec-Bench at T = 1), and which kin drafts a batch's tail is the bandit's choice,
        so pooled over rows the kin that drafted more of the tail reads ahead: ``cascade``, 2 of its 4 steps at one
        row after a batch, 1.54 against ``lowbit``'s 1.23, behind it at four rows (1.09 against 1.24)
        (``experiments/2026-12-07-kin-by-rows``). False where no row count has that many steps of each."""
        from scipy.stats import t

        if by_rows:
            estimates = self._by_rows(drafter, other)
        else:
            estimates = [self._estimate([d]) for d in (drafter, other)]
            estimates = [None if e is None else (e[0], [(e[1], e[2] - 1)]) for e in estimates]
        if None in estimates:
            return False
        (mine, parts_mine), (theirs, parts_theirs) = estimates
        parts = parts_mine + [(share * share * v, df) for v, df in parts_theirs]
        variance = sum(v for v, _ in parts)
        if variance <= 0:  # no spread at all: a tie is a tie
            return share * theirs - mine > 0
        dof = variance ** 2 / sum(v * v / df for v, df in parts)  # Welch-Satterthwaite
        return share * theirs - mine > t.ppf(0.5 + confidence / 2, dof) * variance ** 0.5

    def _by_rows(self, drafter: int, other: int) -> list:
        """Both drafters' speedups standardised to the same mix of row counts, each with its parts' variances and
        degrees of freedom, one a row count (:meth:`below`'s ``by_rows``; [None, None] where no row count is shared)."""
        least = self.STRATUM_STEPS
        rows = sorted(r for d, r in self.strata if d == drafter and self.strata[d, r][0] >= least
                      and self.strata.get((other, r), [0])[0] >= least)
        if not rows:
            return [None, None]
        weights = [self.strata[drafter, r][0] + self.strata[other, r][0] for r in rows]
        weights = [w / sum(weights) for w in weights]
        estimates = []
        for d in (drafter, other):
            parts = [_ratio(*self.strata[d, r]) for r in rows]
            estimates.append((sum(w * ratio for w, (ratio, _) in zip(weights, parts)),
                              [(w * w * variance, self.strata[d, r][0] - 1)
                               for w, r, (_, variance) in zip(weights, rows, parts)]))
        return estimates

    def _estimate(self, drafters: Iterable[int]) -> tuple[float, float, int] | None:
        """The pooled speedup of ``drafters``' counted steps, its variance and their number (None: fewer than two):
        the ratio estimator's variance, the spread of g - R s over sum s (Cochran 1977, chapter 6)."""
        counted = [d for d in set(drafters) if d in self.moments]
        n, ss, gg, sg = (sum(self.moments[d][i] for d in counted) for i in range(4))
        seconds, plain_s = (sum(self.by_drafter[d][i] for d in counted) for i in range(2))
        if n < 2 or seconds <= 0:
            return None
        return (*_ratio(n, seconds, plain_s, ss, gg, sg), int(n))

    def paid_among(self, drafters: Iterable[int], confidence: float | None = None) -> bool:
        """Whether drafting with ``drafters`` (those still in play) has paid, all in: without ``confidence``, not
        :meth:`lost_among`; with it, their pooled speedup is above plain decoding beyond the noise of their steps - by
        more than Student's t quantile (two-sided ``confidence``) times its standard error (:meth:`_estimate`). True
        before two of their steps are counted: until the tally can speak, the bandit's word stands. Off by default
        (``BatchDecoder``'s ``judge_all_in=True``): on the AMD EPYC's batch cells it was no faster, since at B = 8 the
        tally's bar, not its noise, read drafting up to a fifth better than it was
        (``experiments/2026-12-07-judge-beyond-noise``)."""
        if confidence is None:
            return not self.lost_among(drafters)
        from scipy.stats import t

        estimate = self._estimate(drafters)
        if estimate is None:
            return True
        ratio, variance, n = estimate
        return ratio - t.ppf(0.5 + confidence / 2, n - 1) * variance ** 0.5 > 1.0

    @property
    def lost(self) -> bool:
        """Whether the drafting steps so far took longer than plain steps would have (False before any)."""
        return self.seconds > self.plain_s > 0

    def lost_among(self, drafters: Iterable[int]) -> bool:
        """:attr:`lost` over the steps of ``drafters`` alone: whether drafting with those still in play has lost, all
        in - not the run's, whose first batch tried every drafter (the elimination's losses, paid once, would keep
        the run's tally below plain decoding for batches after the drafter kept began to pay)."""
        counted = [self.by_drafter[d] for d in set(drafters) if d in self.by_drafter]
        seconds, plain_s = sum(s for s, _ in counted), sum(p for _, p in counted)
        return seconds > plain_s > 0

    def clear(self) -> None:
        self.seconds = self.plain_s = 0.0
        self.by_drafter.clear()
        self.moments.clear()
        self.strata.clear()


class LossBudget:
    """What a run's batches may lose to drafting before something pays (module docstring).

    Args:
        share: the loss allowed a batch, as a share of its plain time (``max_new_tokens`` plain steps a row); a batch
            too short for it to cover one plain step's loss (``share * max_new_tokens < 1``: a 16-token warm-up at
            3%) is not judged, or its first exploratory step would switch drafting off for the long batches after it.
    """

    def __init__(self, share: float) -> None:
        if not share > 0:
            raise ValueError(f"a loss budget is a share of a batch's plain time > 0, got {share}")
        self.share = float(share)
        self.fruitless = 0  #: batches in a row that spent their budget
        self.skips_left = 0  #: batches still to decode without drafting
        self.off = False  #: this batch decodes plainly from here on
        self._tokens, self._lost, self._allowance, self._paid = 0, 0.0, None, False

    def begin(self, max_new_tokens: int) -> bool:
        """A batch starts; True: it is one of the batches to skip (no drafting at all)."""
        self._tokens, self._lost, self._allowance, self._paid = int(max_new_tokens), 0.0, None, False
        self.off = self.skips_left > 0
        self.skips_left -= int(self.off)
        return self.off

    def step(self, seconds: float, committed_per_row: float, plain_rate: float | None, pays: bool) -> bool:
        """After a step: its seconds (a drafter's rows begun left out: paid once a batch, as the prefill is), the
        tokens it committed a row, a plain step's tokens a row a second (None: not measured yet) and whether drafting
        pays by now. True: the rest of the batch decodes plainly."""
        self._paid = self._paid or pays
        if plain_rate and not self.off and not self._paid:
            self._allowance = self._allowance or self.share * self._tokens / plain_rate
            self._lost += seconds - committed_per_row / plain_rate
            self.off = self._lost > self._allowance
        return self.off

    def end(self) -> None:
        """A batch ends: a batch in which something paid ends the streak; one that spent its budget lengthens it."""
        if self._paid:
            self.fruitless, self.skips_left = 0, 0
        elif self._allowance is not None and self.share * self._tokens >= 1:
            self.fruitless = self.fruitless + 1 if self.off else 0
            self.skips_left = 2 ** (self.fruitless - 1) if self.off else 0

    def forget(self) -> None:
        self.fruitless, self.skips_left, self.off = 0, 0, False
