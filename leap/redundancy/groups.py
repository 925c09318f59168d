"""LEAP's decision groups (Stage I): consecutive layers of one zone that take one action together.

Rules (LEAP: Zheng & Liu, ICML 2026, "Zone-Aware MCTS for LLM Self-Speculative Decoding"; its released
code, repository HangerYang/Star, folder LEAP/):

* an early segment is one group;
* middle zone: a layer is a *spike* if ``Delta L_l > max(0.08, 85th percentile of middle Delta L)`` or
  ``R_l > 1.3 R_{l-1}``; a new group starts where spike status changes, and groups hold at most
  ``max(3, |middle| // 6)`` layers;
* final zone: a new group starts at an *elite* layer (``Delta L_l >=`` the 82.5th percentile of final
  Delta L, or ``> 2x`` the previous layer's Delta L), and groups hold at most ``max(2, |final| // 4)``;
* groups never cross a zone boundary.

``layerwise_groups`` (one layer per group) is the "w/o group" ablation. Pure numpy; no torch.
Who calls what: :func:`leap.redundancy.space.build_search_space`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from leap.redundancy.zones import Zone, segments

__all__ = ["leap_groups", "layerwise_groups"]


def layerwise_groups(zones: Sequence[Zone]) -> list[list[int]]:
    return [[l] for l in range(len(zones))]


def leap_groups(zones: Sequence[Zone], residual_ratio: Sequence[float], ear_gain: Sequence[float]) -> list[list[int]]:
    """Groups (lists of layer indices, in layer order) partitioning every zone."""
    R = np.asarray(residual_ratio, dtype=float)
    D = np.asarray(ear_gain, dtype=float)
    middle = [l for l, z in enumerate(zones) if z is Zone.MIDDLE]
    final = [l for l, z in enumerate(zones) if z is Zone.FINAL]
    mid_max = max(3, len(middle) // 6)
    fin_max = max(2, len(final) // 4)
    spike_thr = max(0.08, float(np.percentile(D[middle], 85))) if middle else np.inf
    elite_thr = float(np.percentile(D[final], 82.5)) if final else np.inf

    def spike(l: int) -> bool:
        return bool(D[l] > spike_thr or (l > 0 and R[l] > 1.3 * R[l - 1]))

    def elite(l: int) -> bool:
        return bool(D[l] >= elite_thr or (l > 0 and D[l] > 2 * D[l - 1] and D[l - 1] > 0))

    groups: list[list[int]] = []
    for start, stop, zone in segments(zones):
        if zone is Zone.EARLY:
            groups.append(list(range(start, stop)))
            continue
        current = [start]
        for l in range(start + 1, stop):
            if zone is Zone.MIDDLE:
                cut = spike(l) != spike(l - 1) or len(current) >= mid_max
            else:
                cut = elite(l) or len(current) >= fin_max
            if cut:
                groups.append(current)
                current = [l]
            else:
                current.append(l)
        groups.append(current)
    return groups
