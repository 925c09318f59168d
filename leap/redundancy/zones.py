"""LEAP's zone partition (Stage I): early / middle / final, from R_l and Delta L_l.

Rules (LEAP: Zheng & Liu, ICML 2026, "Zone-Aware MCTS for LLM Self-Speculative Decoding"; its released
code, repository HangerYang/Star, folder LEAP/):

1. thresholds ``r_thr`` = ``r_percentile``-th percentile of R, ``ear_thr`` = ``ear_percentile``-th
   percentile of Delta L (defaults 70/70);
2. the first ``n_early`` (3) layers are EARLY and the last ``n_final`` (2) FINAL, whatever the scores;
3. another layer is an early candidate if ``R_l > r_thr``, a final candidate if ``Delta L_l > ear_thr``
   and ``l >= max(n_early, floor(L / 4))``; both -> the larger of ``R_l / r_thr`` and
   ``Delta L_l / ear_thr`` wins; neither -> MIDDLE;
4. segments (maximal runs of one zone) shorter than ``min_segment`` (2) are merged into a neighbour,
   early segments protected (never merged away), forced layers never relabelled.

So a zone is a set of contiguous segments; an early segment may sit mid-network (a layer that changes
its input a lot is never skipped). Zones decide the allowed actions: EARLY {EXECUTE}, MIDDLE
{EXECUTE, SKIP}, FINAL {EXECUTE, REPEAT}.

Pure numpy; no torch. Who calls what: :func:`leap.redundancy.space.build_search_space`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leap.core.config import LayerAction

__all__ = ["Zone", "ZoneSettings", "assign_zones", "smooth_zones", "segments", "ZONE_ACTIONS"]


class Zone(enum.Enum):
    EARLY = "early"
    MIDDLE = "middle"
    FINAL = "final"


ZONE_ACTIONS: dict[Zone, tuple[LayerAction, ...]] = {
    Zone.EARLY: (LayerAction.EXECUTE,),
    Zone.MIDDLE: (LayerAction.EXECUTE, LayerAction.SKIP),
    Zone.FINAL: (LayerAction.EXECUTE, LayerAction.REPEAT),
}


@dataclass(frozen=True)
class ZoneSettings:
    """Zone-partition settings (LEAP's defaults; its demo uses ``r_percentile=75, ear_percentile=82.5``)."""

    r_percentile: float = 70.0
    ear_percentile: float = 70.0
    n_early: int = 3
    n_final: int = 2
    min_segment: int = 2

    def __post_init__(self) -> None:
        for name in ("r_percentile", "ear_percentile"):
            if not 0.0 <= getattr(self, name) <= 100.0:
                raise ValueError(f"{name} must be in [0, 100], got {getattr(self, name)}")
        if self.n_early < 0 or self.n_final < 0 or self.min_segment < 1:
            raise ValueError("n_early and n_final must be >= 0 and min_segment >= 1")


def segments(zones: Sequence[Zone]) -> list[tuple[int, int, Zone]]:
    """Maximal runs ``(start, stop, zone)`` (``stop`` exclusive)."""
    out: list[tuple[int, int, Zone]] = []
    start = 0
    for i in range(1, len(zones) + 1):
        if i == len(zones) or zones[i] != zones[start]:
            out.append((start, i, zones[start]))
            start = i
    return out


def assign_zones(
    residual_ratio: Sequence[float], ear_gain: Sequence[float], settings: ZoneSettings = ZoneSettings()
) -> list[Zone]:
    """Zone of every layer from LEAP's two metrics (rules 1-4 of the module docstring)."""
    R = np.asarray(residual_ratio, dtype=float)
    D = np.asarray(ear_gain, dtype=float)
    L = len(R)
    if len(D) != L or L == 0:
        raise ValueError(f"need one R and one Delta L per layer; got {len(R)} and {len(D)}")
    n_early = min(settings.n_early, L)
    n_final = min(settings.n_final, L - n_early)
    r_thr = float(np.percentile(R, settings.r_percentile))
    ear_thr = float(np.percentile(D, settings.ear_percentile))
    first_final = max(n_early, L // 4)
    zones: list[Zone] = []
    for l in range(L):
        if l < n_early:
            zones.append(Zone.EARLY)
        elif l >= L - n_final:
            zones.append(Zone.FINAL)
        else:
            early = R[l] > r_thr
            final = D[l] > ear_thr and l >= first_final
            if early and final:
                zones.append(Zone.EARLY if R[l] / (r_thr + 1e-10) >= D[l] / (ear_thr + 1e-10) else Zone.FINAL)
            else:
                zones.append(Zone.EARLY if early else Zone.FINAL if final else Zone.MIDDLE)
    return smooth_zones(zones, settings.min_segment, forced=set(range(n_early)) | set(range(L - n_final, L)))


def smooth_zones(zones: Sequence[Zone], min_segment: int = 2, forced: set[int] = frozenset()) -> list[Zone]:
    """Merge segments shorter than ``min_segment`` into a neighbour (rule 4).

    Early segments and segments holding a forced layer stay. A short segment joins its longer
    neighbour (an early neighbour first, as LEAP protects the early zone); ties go to the left.
    Each merge removes a segment, so this terminates.
    """
    out = list(zones)
    while True:
        segs = segments(out)
        short = [
            (i, s) for i, s in enumerate(segs)
            if s[1] - s[0] < min_segment and s[2] is not Zone.EARLY and not forced & set(range(s[0], s[1]))
        ]
        if not short or len(segs) == 1:
            return out
        i, (start, stop, _) = short[0]
        left = segs[i - 1] if i > 0 else None
        right = segs[i + 1] if i + 1 < len(segs) else None
        neighbours = [n for n in (left, right) if n is not None]
        early = [n for n in neighbours if n[2] is Zone.EARLY]
        target = (early or sorted(neighbours, key=lambda n: -(n[1] - n[0])))[0]
        for l in range(start, stop):
            out[l] = target[2]
