"""How many draft tokens each row of a batch may propose this step: fixed, or a bandit over measured goodput.

Whether speculation pays at batch size B > 1 depends on how far the verifier is from compute-bound: a step over
B x (k + 1) positions costs more as B and k grow, while what it commits depends on the drafts' acceptance
(issue 37). :class:`GoodputBandit` measures that trade on the batch itself: each arm is a chain cap (0 = no
draft: plain batched decoding), its reward a step's goodput (tokens committed by every row / the step's wall
time, draft included), and UCB1 (:func:`leap.core.ucb1.ucb1_choice`) picks the next cap. An arm that loses
to plain decoding stops being pulled, so speculation turns itself off where it loses.

Who calls what: :class:`leap.core.decoding.batch.BatchDecoder` calls :meth:`choose` before each step and
:meth:`update` after it.
"""

from __future__ import annotations

from collections.abc import Sequence

from leap.core.errors import SettingsError
from leap.core.ucb1 import ucb1_choice

__all__ = ["FixedCap", "GoodputBandit"]


class FixedCap:
    """The same cap on every step."""

    def __init__(self, cap: int) -> None:
        self.cap = int(cap)

    def choose(self) -> int:
        return self.cap

    def update(self, cap: int, committed: int, seconds: float) -> None:
        pass


class GoodputBandit:
    """UCB1 over chain caps, rewarded by each step's goodput relative to the best arm's mean so far.

    Args:
        caps: the arms (distinct draft-token caps, 0 allowed).
        c: UCB1's exploration weight on rewards normalised to the best arm's mean (1.0 = best).
    """

    def __init__(self, caps: Sequence[int], c: float = 0.2) -> None:
        self.caps = [int(x) for x in caps]
        if not self.caps or len(set(self.caps)) != len(self.caps) or min(self.caps) < 0:
            raise SettingsError(f"caps must be distinct draft-token counts >= 0, got {list(caps)}")
        self.c = float(c)
        self.counts = [0] * len(self.caps)
        self.sums = [0.0] * len(self.caps)

    def choose(self) -> int:
        means = [s / n for s, n in zip(self.sums, self.counts) if n]
        scale = max(means) if means and max(means) > 0 else 1.0
        return self.caps[ucb1_choice(self.counts, [s / scale for s in self.sums], self.c)]

    def update(self, cap: int, committed: int, seconds: float) -> None:
        arm = self.caps.index(int(cap))
        self.counts[arm] += 1
        self.sums[arm] += committed / max(seconds, 1e-9)

    def means(self) -> dict[int, float]:
        """Mean goodput (tokens/s) per tried cap."""
        return {c: s / n for c, s, n in zip(self.caps, self.sums, self.counts) if n}
