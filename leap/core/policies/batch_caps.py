"""How many draft tokens each row of a batch may propose this step: fixed, or a bandit over measured goodput.

Whether speculation pays at batch size B > 1 depends on how far the verifier is from compute-bound: a step over
B x (k + 1) positions costs more as B and k grow, while what it commits depends on the drafts' acceptance
(issue 37). :class:`GoodputBandit` measures that trade on the batch itself: each arm is a chain cap (0 = no
draft: plain batched decoding), its reward a step's goodput (tokens committed by every row / the step's wall
time, draft included), and UCB1 (:func:`leap.core.ucb1.ucb1_choice`) picks the next cap. An arm that loses
to plain decoding stops being pulled, so speculation turns itself off where it loses. With several drafters
(:class:`~leap.core.decoding.batch.BatchDecoder` given a list: the drafter search at batch level), an arm is a
``(drafter index, cap)`` pair (:func:`drafter_arms`), so the bandit picks whether, how far and with what to draft.

Who calls what: :class:`leap.core.decoding.batch.BatchDecoder` calls :meth:`choose` before each step and
:meth:`update` after it.
"""

from __future__ import annotations

from collections.abc import Sequence

from leap.core.errors import SettingsError
from leap.core.ucb1 import ucb1_choice

__all__ = ["FixedCap", "GoodputBandit", "drafter_arms"]

Arm = int | tuple[int, int]  # a cap, or (drafter index, cap)


class FixedCap:
    """The same cap on every step."""

    def __init__(self, cap: int) -> None:
        self.cap = int(cap)

    def choose(self) -> int:
        return self.cap

    def update(self, cap: int, committed: int, seconds: float) -> None:
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
    """

    def __init__(self, caps: Sequence[Arm], c: float = 0.2) -> None:
        self.caps = [tuple(int(v) for v in x) if isinstance(x, tuple) else int(x) for x in caps]
        if not self.caps or len(set(self.caps)) != len(self.caps) or min(_cap(x) for x in self.caps) < 0:
            raise SettingsError(f"caps must be distinct draft-token counts >= 0 (or distinct (drafter, cap) pairs), "
                                f"got {list(caps)}")
        self.c = float(c)
        self.counts = [0] * len(self.caps)
        self.tokens = [0.0] * len(self.caps)  # committed by each arm's steps
        self.seconds = [0.0] * len(self.caps)  # those steps' wall time

    def _value(self, arm: int) -> float:
        return self.tokens[arm] / max(self.seconds[arm], 1e-9)

    def choose(self) -> Arm:
        tried = [self._value(a) for a, n in enumerate(self.counts) if n]
        scale = max(tried) if tried and max(tried) > 0 else 1.0
        sums = [self._value(a) * n / scale for a, n in enumerate(self.counts)]  # UCB1 reads value x pulls
        return self.caps[ucb1_choice(self.counts, sums, self.c)]

    def update(self, cap: Arm, committed: float, seconds: float) -> None:
        arm = self.caps.index(tuple(int(v) for v in cap) if isinstance(cap, tuple) else int(cap))
        self.counts[arm] += 1
        self.tokens[arm] += float(committed)
        self.seconds[arm] += max(float(seconds), 1e-9)

    def seeded(self) -> GoodputBandit:
        """A new bandit over the same arms that starts from this one's values, each counted as one pull of one
        second: what :meth:`~leap.core.decoding.batch.BatchDecoder.policy` gives a batch with a new number of rows,
        so that the exploration of many arms (a drafter search) is paid once per run, not once per row count."""
        other = GoodputBandit(self.caps, self.c)
        for arm, n in enumerate(self.counts):
            if n:
                other.counts[arm], other.tokens[arm], other.seconds[arm] = 1, self._value(arm), 1.0
        return other

    def means(self) -> dict[Arm, float]:
        """Goodput (tokens/s) per tried arm."""
        return {c: self._value(a) for a, (c, n) in enumerate(zip(self.caps, self.counts)) if n}
