"""leap.redundancy: per-layer redundancy metrics, LEAP's zones and groups, and the search space.

Metric modules need torch and are imported when a metric is looked up; zones, groups and the search
space are pure numpy; :mod:`leap.redundancy.build` builds LEAP's space from any registered metric.

May import: :mod:`leap.core` (the model, traces and the decoder for Observation 1).
"""

from __future__ import annotations

import importlib
from typing import Any

from leap.redundancy.groups import layerwise_groups, leap_groups
from leap.redundancy.space import DecisionUnit, SearchSpace, build_search_space
from leap.redundancy.zones import ZONE_ACTIONS, Zone, ZoneSettings, assign_zones, smooth_zones

__all__ = [
    "Zone", "ZoneSettings", "ZONE_ACTIONS", "assign_zones", "smooth_zones", "leap_groups", "layerwise_groups",
    "DecisionUnit", "SearchSpace", "build_search_space", "redundancy_metrics", "compute_metrics",
    "RedundancyMetric", "make_metric",
]


def __getattr__(name: str) -> Any:
    if name in {"redundancy_metrics", "compute_metrics", "RedundancyMetric", "make_metric"}:
        return getattr(importlib.import_module("leap.redundancy.base"), name)
    raise AttributeError(f"module 'leap.redundancy' has no attribute {name!r}")
