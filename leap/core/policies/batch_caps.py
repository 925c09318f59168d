"""How many draft tokens each row of a batch may propose this step: fixed, or a bandit over measured goodput.

Whether speculation pays at batch size B > 1 depends on how far the verifier is from compute-bound: a step over
B x (k + 1) positions costs more as B and k grow, while what it commits depends on the drafts' acceptance
(issue 37). :class:`GoodputBandit` measures that trade on the batch itself: each arm is a chain cap (0 = no
draft: plain batched decoding), its reward a step's goodput (tokens committed by every row / the step's wall
time, draft included), and UCB1 (:func:`leap.core.ucb1.ucb1_choice`) picks the next cap. An arm that loses
to plain decoding stops being pulled, so speculation turns itself off where it loses. With several drafters
(:class:`~leap.core.decoding.batch.BatchDecoder` given a list: the drafter search at batch level), an arm is a
``(drafter index, cap)`` pair (:func:`drafter_arms`), so the bandit picks whether, how far and with what to draft.

Two things keep it from paying for what it cannot use (measured on leap's seed prompts:
``experiments/2026-11-26-batch-search-seed/batch_search_seed.py``). **A ladder of caps**: a drafter's longer cap is tried only once its next
shorter cap has been tried and did at least as well as plain decoding - a chain that loses at 4 tokens does not win
at 16, since every token past the fourth is accepted only after the first four were - so a search over many
drafters explores each one's dear arms only where its cheap arm paid. **Values that follow the text**: an arm's
tokens and seconds are discounted by ``1 - 1/horizon`` at each of its own pulls (a running ratio over its last
~``horizon`` steps; Garivier & Moulines 2011's discounting, per arm), because a batch changes under the bandit - rows
leave, and a drafter that copies well early (prompt lookup over a repeated passage) stops doing so; an all-time
ratio kept such an arm first long after its steps had stopped paying.

**A bar measured now** (``refresh``): every arm is judged against plain decoding's goodput - the screen's bar,
:meth:`GoodputBandit.pays`, a batch's loss budget - and an arm's value only moves when it is pulled, so a plain arm
last pulled while the machine was loaded kept its slow value for the rest of the run: on the Xeon at B = 8 plain
steps took 246 ms a step in a loaded batch against 93-114 ms in the others, and in the last batch the search drafted
on 100 of 101 steps with ``prompt-lookup``, whose steps ran at 0.8 of plain decoding's goodput, valued at 1.0 to 1.95
times the stale plain (``experiments/2026-11-28-stale-bar``). So the plain arm is pulled again once the bandit
has taken ``refresh`` steps since its last pull, and its statistics age with the steps taken since (discounted by
``1 - 1/refresh`` a step, as Garivier & Moulines' discounted UCB discounts every arm at every step): what plain
measured long ago, under another load, gives way to what its next pulls measure. **A bar robust to a stray step**
(``fresh_bar``): a plain step does the same work every time, yet a few in a thousand take two to five times its usual
seconds, for every method alike (4 of ``ar``'s 1272 at B = 8 below: the machine's, not the arm's); discounted per pull,
the last few pulls carried them into the bar: at B = 8 on the AMD EPYC the search's first batch ended on plain steps of
154, 39 and 167 ms among 34-35 ms ones, and the bar stood 1.7 times plain's true step for the next two batches while
``stand`` drafted at 1.4 times its cost (``docs/data/regret-amd-38fe383/b8-t0``); eight pulls of a slow stretch likewise
outweighed a refresh's one fresh pull 2.6 to 1 (``docs/data/regret-amd-ed9ae76/b8-t0``). So plain's goodput is the mean
of its last five pulls' tokens over the median of their seconds, and a refresh pulls it three times in a row: the median
then lies within the fresh pulls' range. ``fresh_bar=False`` is the ablation (discounted sums, one pull). A bandit
seeded for a new row count (:meth:`GoodputBandit.seeded`) inherits each arm's age and plain's last pulls. The drafting
arms keep their own discount (per pull), so that a rarely pulled arm is not judged by its last step alone; ageing them
too measured level with it at B = 4 and T = 1 (both 0.99 of plain decoding, 0.95 with ``refresh`` off, each interval
about 0.13 wide on that loaded host: the same experiment), so that choice rests on the variance argument, not on a
measurement.

**A cost-model screen** (with ``verify_cost``, issue 34's "a trial is first screened by the calibrated cost model
with the acceptance measured so far", at batch level): once one of a drafter's caps has been pulled, each of its
untried caps ``k`` is predicted - ``1 + a(k)`` tokens a row, ``a(k) = alpha + ... + alpha^k`` with the per-token
acceptance ``alpha`` that explains the accepted drafts its pulled caps measured (a geometric chain), over a plain step's
measured seconds times ``verify_cost(1 + k)`` (the calibrated cost of verifying ``1 + k`` tokens a row against one,
at this batch's rows: :meth:`~leap.core.runtime.costs.Calibration.verify_rows`) plus ``k`` times its measured
drafting seconds per chain position - and opened only where that beats plain decoding's measured goodput
(``bar="plain"``, the default). It replaces the ladder's rule (the prediction may open a cap two rungs up, and closes a
rung whose shorter cap paid only by noise in one step's goodput: acceptance is counted over every row, a goodput over
one step's clock). ``bar="best"`` opens a cap only where it beats every arm pulled so far as the same model predicts
them: against plain, a drafter that copies now and then (prompt lookup, about plain's goodput) climbed its caps 2, 4,
8 and 16 in a row mid-run while ``lowbit`` paid 1.7 times plain (``docs/data/regret-6bd5159/b4-t0``). Alone it helped
on leap's seed prompts at B = 4 (1.44x plain batched decoding against 1.29x: ``docs/data/batch_search_seed_b4_bar.json``);
with :meth:`GoodputBandit.choose`'s ``switching`` it did not pay, so it is off (the records:
``experiments/2026-11-26-batch-search-seed/NOTES.md``).

Who calls what: :class:`leap.core.decoding.batch.BatchDecoder` calls :meth:`choose` before each step and
:meth:`update` after it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from leap.core.errors import SettingsError
from leap.core.ucb1 import ucb1_choice

__all__ = ["FixedCap", "GoodputBandit", "drafter_arms"]

Arm = int | tuple[int, int]  # a cap, or (drafter index, cap)


class FixedCap:
    """The same cap on every step."""

    def __init__(self, cap: int) -> None:
        self.cap = int(cap)

    def choose(self, begun: set[int] | None = None) -> int:
        return self.cap

    def update(self, cap: int, committed: int, seconds: float, **screen: float) -> None:
        pass


def _cap(arm: Arm) -> int:
    return arm[1] if isinstance(arm, tuple) else arm


def drafter_arms(drafters: int, caps: Sequence[int]) -> list[tuple[int, int]]:
    """The arms of a bandit over ``drafters`` drafters and ``caps``: every drafter with every cap above 0, and one
    plain arm ``(0, 0)`` where ``caps`` holds 0 (no draft is the same whichever drafter would have drafted). In the
    order UCB1 tries them first: plain, then the shortest cap of every drafter before any longer one - the cheap
    steps first, so that a batch's loss budget can stop the search before its dearest arms are tried."""
    plain = [(0, 0)] if 0 in caps else []
    return plain + [(d, int(c)) for c in sorted(int(c) for c in caps if int(c) > 0) for d in range(int(drafters))]


class GoodputBandit:
    """UCB1 over chain caps (or ``(drafter, cap)`` arms), each arm's value its goodput - the tokens its steps
    committed over the seconds they took (a ratio of sums: a throughput; a mean of per-step ratios would favour
    arms whose steps vary in length) - relative to the best arm's so far.

    Args:
        caps: the arms: distinct draft-token caps (0 allowed), or distinct ``(drafter index, cap)`` pairs
            (:func:`drafter_arms`).
        c: UCB1's exploration weight on values normalised to the best arm's (1.0 = best).
        horizon: an arm's value covers its last ~``horizon`` pulls (each pull discounts its earlier tokens and
            seconds by ``1 - 1/horizon``); 0: all of them, undiscounted.
        ladder: try a drafter's longer cap only after its next shorter one has done at least as well as plain
            decoding (the arm of cap 0; where there is none, after it has been tried).
        verify_cost: ``q -> `` the cost of a verification over ``q`` tokens a row against one token a row, at the
            batch's rows (from calibration): screen a drafter's untried caps by the cost model instead of the
            ladder's rule (module docstring); None: the ladder's rule. Needs :meth:`update`'s ``accepted`` and
            ``draft_s``.
        bar: what the screen's prediction must reach to open an untried cap: ``"best"``, the best goodput any arm
            has measured so far, or ``"plain"``, plain decoding's (the default).
        switching: with several drafters, mid-batch only the drafters already begun explore (:meth:`choose`); off.
        refresh: the plain arm is pulled again once the bandit has taken ``refresh`` steps since its last pull, and
            its statistics age by ``1 - 1/refresh`` for each step taken since (module docstring: a bar measured now);
            0: off (the ablation).
        fresh_bar: plain's goodput is the mean of its last :attr:`BAR_PULLS` pulls' tokens over the median of their
            seconds, and a refresh pulls it :attr:`REFRESH_PULLS` times (module docstring: a bar robust to a stray
            step); False: its discounted sums, one pull (the ablation).
    """

    BAR_PULLS = 5  #: the plain pulls whose median seconds are the bar (``fresh_bar``)
    REFRESH_PULLS = 3  #: plain pulls a refresh makes in a row (``fresh_bar``; one without)

    def __init__(self, caps: Sequence[Arm], c: float = 0.2, *, horizon: int = 8, ladder: bool = True,
                 verify_cost: Callable[[int], float] | None = None, bar: str = "plain", switching: bool = False,
                 refresh: int = 32, fresh_bar: bool = True) -> None:
        self.caps = [tuple(int(v) for v in x) if isinstance(x, tuple) else int(x) for x in caps]
        if not self.caps or len(set(self.caps)) != len(self.caps) or min(_cap(x) for x in self.caps) < 0:
            raise SettingsError(f"caps must be distinct draft-token counts >= 0 (or distinct (drafter, cap) pairs), "
                                f"got {list(caps)}")
        if horizon < 0:
            raise SettingsError(f"horizon is a number of pulls >= 0 (0: no discounting), got {horizon}")
        if refresh < 0:
            raise SettingsError(f"refresh is a number of steps >= 0 (0: off), got {refresh}")
        if bar not in ("best", "plain"):
            raise SettingsError(f"the screen's bar is best (the best arm's measured goodput) or plain, got {bar!r}")
        self.c, self.horizon, self.ladder, self.bar = float(c), int(horizon), bool(ladder), bar
        self.switching = bool(switching)  # a drafter's setup mid-batch counted in the choice (:meth:`choose`)
        self._below = [self._shorter(a) for a in range(len(self.caps))]  # the arm each arm's ladder rests on
        self.counts = [0] * len(self.caps)
        self.tokens = [0.0] * len(self.caps)  # committed by each arm's steps
        self.seconds = [0.0] * len(self.caps)  # those steps' wall time
        self.verify_cost = verify_cost
        self.steps = [0.0] * len(self.caps)  # discounted like tokens and seconds: the screen's statistics
        self.accepted = [0.0] * len(self.caps)  # draft tokens accepted a row
        self.draft_s = [0.0] * len(self.caps)  # drafting seconds
        self.retired: frozenset[int] = frozenset()  # drafters no longer drafting (:meth:`retire`)
        self.refresh, self.fresh_bar = int(refresh), bool(fresh_bar)
        self._owed = 0  # the refresh's plain pulls still to make
        self.recent: list[tuple[float, float]] = []  # plain's last BAR_PULLS pulls: (tokens, seconds)
        self.clock = 0  # steps taken (:meth:`update` calls)
        self.last = [0] * len(self.caps)  # the clock at each arm's last pull

    def _value(self, arm: int) -> float:
        if self.fresh_bar and self.recent and _cap(self.caps[arm]) == 0:  # the bar (module docstring)
            tokens, seconds = zip(*self.recent)
            return sum(tokens) / len(tokens) / max(statistics.median(seconds), 1e-9)
        return self.tokens[arm] / max(self.seconds[arm], 1e-9)

    def _shorter(self, arm: int) -> int | None:
        """The arm of the same drafter with the next shorter cap above 0 (None: ``arm`` is a drafter's shortest)."""
        key = self.caps[arm]
        same = [a for a, other in enumerate(self.caps) if 0 < _cap(other) < _cap(key)
                and (not isinstance(key, tuple) or other[0] == key[0])]
        return max(same, key=lambda a: _cap(self.caps[a])) if same else None

    def retire(self, drafters: set[int] | frozenset[int]) -> None:
        """Close every drafting arm of ``drafters`` (drafter indices; plain decoding's arm stays) until a later call
        leaves them out: the drafter search's memory has pruned them (:class:`~leap.search.batch.BatchSearch`)."""
        self.retired = frozenset(int(d) for d in drafters)

    def rebar(self, seconds: float | None = None) -> None:
        """Make the bar again for a new batch (:class:`~leap.core.policies.batch_bar.BatchBar`; with ``fresh_bar``,
        else nothing changes): plain's last pulls are forgotten and either :attr:`REFRESH_PULLS` pulls are owed now
        (``seconds`` None: measured in this batch) or one pull of ``seconds`` stands in for them (a plain step at this
        row count as the cost model scales the bar this batch measured at another)."""
        if not self.fresh_bar:
            return
        if seconds is None:
            self.recent, self._owed = [], self.REFRESH_PULLS
        else:
            self.recent, self._owed = [(1.0, max(float(seconds), 1e-9))], 0

    def bar_seconds(self) -> float | None:
        """A plain step's seconds by the bar: the median of plain's last pulls' (``fresh_bar``); None while pulls are
        owed, before plain was pulled, or without ``fresh_bar`` (whose bar :meth:`rebar` leaves alone)."""
        if not self.fresh_bar or self._owed or not self.recent:
            return None
        return statistics.median(s for _, s in self.recent)

    def _open(self, arm: int) -> bool:
        """Whether ``arm`` may be pulled now (the ladder: see the class docstring; a retired drafter's arms never)."""
        key = self.caps[arm]
        if isinstance(key, tuple) and key[1] > 0 and key[0] in self.retired:
            return False
        below = self._below[arm]
        if not self.ladder or self.counts[arm] or below is None:
            return True
        plain = [a for a, x in enumerate(self.caps) if _cap(x) == 0 and self.counts[a]]
        if self.verify_cost is not None and plain and self._measured(arm):
            return self.predict(self.caps[arm]) >= self._bar(plain[0])
        if not self.counts[below]:
            return False
        return not plain or self._value(below) >= self._value(plain[0])

    def _bar(self, plain: int) -> float:
        """What an untried cap's prediction must reach to open (``bar``): plain decoding's measured goodput, or with
        ``"best"`` the best the cost model predicts for any pulled arm (plain's measured value among them): the
        cost model's own ranking, so that its errors, made alike for every drafting arm, do not decide."""
        if self.bar == "plain":
            return self._value(plain)
        pulled = [self.caps[a] for a, n in enumerate(self.counts) if n and _cap(self.caps[a]) > 0]
        return max([self._value(plain)] + [self.predict(x) for x in pulled])

    def _siblings(self, arm: int) -> list[int]:
        """The pulled arms (cap > 0) of ``arm``'s drafter."""
        key = self.caps[arm]
        return [a for a, other in enumerate(self.caps) if self.counts[a] and _cap(other) > 0
                and (not isinstance(key, tuple) or other[0] == key[0])]

    def _measured(self, arm: int) -> bool:
        return bool(self._siblings(arm))

    def acceptance(self, arm: Arm) -> float:
        """The per-token acceptance ``alpha`` of ``arm``'s drafter that explains the accepted drafts a row its pulled
        caps measured under a geometric chain (bisection on ``sum_a steps_a * (alpha + ... + alpha^cap_a) =
        sum_a accepted_a``), at most 0.99."""
        arms = self._siblings(self.caps.index(arm))
        target = sum(self.accepted[a] for a in arms)

        def explained(alpha: float) -> float:
            return sum(self.steps[a] * sum(alpha ** i for i in range(1, _cap(self.caps[a]) + 1)) for a in arms)

        lo, hi = 0.0, 0.99
        if explained(hi) <= target:
            return hi
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if explained(mid) < target else (lo, mid)
        return (lo + hi) / 2

    def predict(self, arm: Arm) -> float:
        """The cost model's goodput (tokens a row per second) of ``arm`` from what its drafter's pulled caps and the
        plain arm measured (module docstring); needs ``verify_cost``, a pulled plain arm and a pulled cap of the
        drafter."""
        index = self.caps.index(arm)
        plain = next(a for a, x in enumerate(self.caps) if _cap(x) == 0 and self.counts[a])
        arms, k = self._siblings(index), _cap(arm)
        alpha = self.acceptance(arm)
        per_position = sum(self.draft_s[a] for a in arms) / max(sum(self.steps[a] * _cap(self.caps[a])
                                                                   for a in arms), 1e-9)
        step_s = 1.0 / max(self._value(plain), 1e-9)  # a plain step commits one token a row
        seconds = step_s * self.verify_cost(1 + k) / self.verify_cost(1) + k * per_position
        return (1.0 + sum(alpha ** i for i in range(1, k + 1))) / seconds

    def choose(self, begun: set[int] | None = None) -> Arm:
        """The next arm. ``begun``: the drafters this batch has already drafted with (their rows made and begun; None
        or empty: none yet, or one drafter). Switching to another drafter mid-batch pays its setup -
        :attr:`~leap.core.decoding.batch_session.BatchSession.begin_s`, which a step's goodput leaves out (up to a
        second for a llama.cpp context on the project's CPU, a tenth of a batch) - so once one is begun, the others'
        tried arms are chosen on their values alone (no exploration term) unless one is the best arm so far (to
        exploit it is worth its setup); their exploration waits for a batch's first drafting step, where some drafter's
        setup is paid whichever is chosen. An arm never pulled is still pulled at once (deferring it to a batch's start
        spent whole batches on one untried drafter each, the first chosen; so did leaving the best arm without its
        exploration term while a begun loser kept its own). Only with ``switching=True``, off by default: with the
        best-arm bar and a drafter's first step unmeasured, on leap's seed prompts the search reached 1.29x plain
        batched decoding at B = 4 (1.24x without the three) and 0.86x at B = 8 (0.94x without), ``lowbit-auto``
        1.58x and 1.06x (``docs/data/batch_search_seed_b4_as_before.json``, ``..._b8_as_before.json``)."""
        plain = next((a for a, x in enumerate(self.caps) if _cap(x) == 0 and self.counts[a]), None)
        if self.refresh and plain is not None and self.clock - self.last[plain] >= self.refresh:
            self._owed = self.REFRESH_PULLS if self.fresh_bar else 1
        if self._owed and plain is not None:
            return self.caps[plain]  # the bar, measured again (module docstring)
        tried = [self._value(a) for a, n in enumerate(self.counts) if n]
        scale = max(tried) if tried and max(tried) > 0 else 1.0
        settled = bool(begun) and self.switching

        def setup(a: int) -> bool:  # would pulling this arm now begin a drafter only to explore it?
            key = self.caps[a]
            return (settled and isinstance(key, tuple) and key[1] > 0 and key[0] not in begun
                    and self.counts[a] > 0 and self._value(a) < scale)

        arms = [a for a in range(len(self.caps)) if self._open(a)]
        sums = [self._value(a) * self.counts[a] / scale for a in arms]  # UCB1 reads value x pulls
        explores = [not setup(a) for a in arms]
        return self.caps[arms[ucb1_choice([self.counts[a] for a in arms], sums, self.c, explores=explores)]]

    def update(self, cap: Arm, committed: float, seconds: float, *, accepted: float = 0.0,
               draft_s: float = 0.0) -> None:
        """One step of ``cap``: ``committed`` tokens a row in ``seconds``; for the screen, ``accepted`` draft tokens a
        row and ``draft_s`` seconds of drafting."""
        arm = self.caps.index(tuple(int(v) for v in cap) if isinstance(cap, tuple) else int(cap))
        keep = 1.0 - 1.0 / self.horizon if self.horizon else 1.0  # the arm's earlier pulls, discounted
        if _cap(self.caps[arm]) == 0:  # the bar: its last pulls kept, aged by the steps since its last pull (docstring)
            self.recent = [*self.recent, (float(committed), max(float(seconds), 1e-9))][-self.BAR_PULLS:]
            if self.refresh:
                keep *= (1.0 - 1.0 / self.refresh) ** (self.clock - self.last[arm])
            self._owed = max(self._owed - 1, 0)
        self.clock += 1
        self.last[arm] = self.clock
        self.counts[arm] += 1
        self.tokens[arm] = keep * self.tokens[arm] + float(committed)
        self.seconds[arm] = keep * self.seconds[arm] + max(float(seconds), 1e-9)
        self.steps[arm] = keep * self.steps[arm] + 1.0
        self.accepted[arm] = keep * self.accepted[arm] + float(accepted)
        self.draft_s[arm] = keep * self.draft_s[arm] + float(draft_s)

    def seeded(self, verify_cost: Callable[[int], float] | None = None) -> GoodputBandit:
        """A new bandit over the same arms that starts from this one's values, each counted as one pull of one
        second (and its screen's statistics as one step): what :meth:`~leap.core.decoding.batch.BatchDecoder.policy`
        gives a batch with a new number of rows, so that the exploration of many arms (a drafter search) is paid once
        per run, not once per row count; ``verify_cost`` is the new row count's. Each arm keeps its age (the steps
        since its last pull), so a bar measured long ago is measured again on time, not ``refresh`` steps later."""
        other = GoodputBandit(self.caps, self.c, horizon=self.horizon, ladder=self.ladder, verify_cost=verify_cost,
                              bar=self.bar, switching=self.switching, refresh=self.refresh, fresh_bar=self.fresh_bar)
        for arm, n in enumerate(self.counts):
            other.last[arm] = self.last[arm] - self.clock  # its age (<= 0 on the new clock)
            if n:
                other.counts[arm], other.tokens[arm], other.seconds[arm] = 1, self._value(arm), 1.0
                w = max(self.steps[arm], 1e-9)
                other.steps[arm], other.accepted[arm], other.draft_s[arm] = 1.0, self.accepted[arm] / w, self.draft_s[arm] / w
        other.retired, other._owed, other.recent = self.retired, self._owed, list(self.recent)
        return other

    def pays(self) -> bool:
        """Whether some drafting arm has paid: drafts of its were accepted, and its goodput reaches the plain arm's
        (both measured; an arm whose drafts are never accepted cannot pay, whatever one step's clock says).
        :meth:`~leap.core.decoding.batch.BatchDecoder.generate` stops its loss budget from then on."""
        plain = [a for a, x in enumerate(self.caps) if _cap(x) == 0 and self.counts[a]]
        return bool(plain) and any(self.counts[a] and _cap(x) > 0 and self.accepted[a] > 0
                                   and self._value(a) >= self._value(plain[0]) for a, x in enumerate(self.caps))

    def means(self) -> dict[Arm, float]:
        """Goodput (tokens/s) per tried arm."""
        return {c: self._value(a) for a, (c, n) in enumerate(zip(self.caps, self.counts)) if n}
