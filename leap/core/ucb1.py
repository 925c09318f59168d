"""UCB1 (Auer, Cesa-Bianchi and Fischer, 2002, "Finite-time Analysis of the Multiarmed Bandit Problem"):
the one implementation of leap's bandits.

Every arm is tried once, in order, before any is repeated; then the arm maximising
``mean + c sqrt(2 ln t / n)`` (``t`` pulls in all, ``n`` of this arm). Ties go to the first arm, or to
a random one among them when a NumPy generator is given.

Who calls what: the ``ucb`` search agent (:mod:`leap.search.agents.ucb`) over configurations, the ``bandit``
draft-length policy (:mod:`leap.core.policies.bandit`) over policies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["ucb1_choice"]


def ucb1_choice(counts: Sequence[int], sums: Sequence[float], c: float, rng=None,
                explores: Sequence[bool] | None = None) -> int:
    """The arm UCB1 pulls next, given each arm's pulls ``counts`` and reward ``sums``; ``explores`` (per arm, default
    all True): False leaves an arm its mean alone, no exploration term (a goodput bandit's arm that would pay a setup
    cost now: :class:`~leap.core.policies.batch_caps.GoodputBandit`)."""
    for arm, n in enumerate(counts):
        if n == 0:
            return arm
    t = sum(counts)
    explores = [True] * len(counts) if explores is None else explores
    scores = [s / n + (c * math.sqrt(2 * math.log(t) / n) if e else 0.0) for s, n, e in zip(sums, counts, explores)]
    best = max(scores)
    ties = [i for i, s in enumerate(scores) if s == best]
    return ties[int(rng.integers(len(ties)))] if rng is not None and len(ties) > 1 else ties[0]
