"""Building LEAP's search space from prefill traces with any registered metric: the one place it happens.

LEAP (Stage I) reads two per-layer signals: ``R_l`` (residual ratio) decides the early zone and
``Delta L_l`` (logit-lens accepted-length gain) the final zone and the group cuts
(:mod:`leap.redundancy.zones`, :mod:`leap.redundancy.groups`). Here both are *roles* that any
registered metric can fill:

* ``zone_metric`` (default ``residual-ratio``): the early/middle signal;
* ``group_metric`` (default ``ear-gain``): the final-zone and group-cut signal.

A metric turns its values into the importance the rules read with
:meth:`~leap.redundancy.base.RedundancyMetric.importance`: LEAP's own two metrics pass their raw
values (the rules' constants were written for their scales, so LEAP's defaults are unchanged); any
other metric gives its negated redundancy scaled to [0, 1]. Metric constructor arguments come as
``metric_args = {name: {key: value}}`` (``--metric-arg NAME:key=value``).

Who calls what: :func:`build_space` (per prompt, for the agents), ``leap
redundancy`` (:mod:`leap.redundancy.analysis`), the environments and ``leap smoke``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leap.redundancy.base import compute_metrics, make_metric
from leap.redundancy.space import DecisionUnit, SearchSpace, build_search_space, with_low_bit
from leap.redundancy.zones import ZONE_ACTIONS, Zone, ZoneSettings

__all__ = ["SpaceSettings", "space_from_metrics", "space_from_traces", "build_space", "baseline_space", "SPACE_METRICS"]

SPACE_METRICS = ("residual-ratio", "ear-gain", "cosine")  # LEAP's two plus the one SWIFT/CLaSP-style agents rank by


@dataclass(frozen=True)
class SpaceSettings:
    """Which metrics fill LEAP's two roles, their constructor arguments, and the zone rule settings."""

    zone_metric: str = "residual-ratio"
    group_metric: str = "ear-gain"
    metric_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    zone_settings: ZoneSettings = ZoneSettings()
    zones: bool = True
    groups: bool = True
    #: add the per-layer precision action (LOW) to the middle and final zones (:func:`with_low_bit`)
    low_bit: bool = False

    def args(self, name: str) -> dict[str, Any]:
        return dict(self.metric_args.get(name, {}))


def space_from_metrics(metrics: Mapping[str, Sequence[float]], settings: SpaceSettings = SpaceSettings()) -> SearchSpace:
    """The space from per-layer metric values (``metrics`` must hold both roles' metrics)."""
    missing = [m for m in (settings.zone_metric, settings.group_metric) if m not in metrics]
    if missing:
        raise KeyError(f"metrics {missing} were not computed; compute them before building the space")
    zone_signal = make_metric(settings.zone_metric, **settings.args(settings.zone_metric)).importance(
        metrics[settings.zone_metric])
    group_signal = make_metric(settings.group_metric, **settings.args(settings.group_metric)).importance(
        metrics[settings.group_metric])
    space = build_search_space(zone_signal, group_signal, settings.zone_settings, zones=settings.zones,
                               groups=settings.groups, metrics={k: np.asarray(v) for k, v in metrics.items()})
    return with_low_bit(space) if settings.low_bit else space


def space_from_traces(traces, settings: SpaceSettings = SpaceSettings(),
                      metrics: Sequence[str] | None = SPACE_METRICS) -> SearchSpace:
    """Compute ``metrics`` (None: every registered one) plus the two roles' on ``traces`` (one trace or a
    list, averaged), then :func:`space_from_metrics`."""
    names = None if metrics is None else list(dict.fromkeys([*metrics, settings.zone_metric, settings.group_metric]))
    values = compute_metrics(traces, names, metric_args=settings.metric_args)
    return space_from_metrics(values, settings)


def baseline_space(num_layers: int) -> SearchSpace:
    """One unit per layer, first and last layer execute-only, the rest EXECUTE/SKIP (SWIFT, CLaSP)."""
    units = []
    for l in range(num_layers):
        zone = Zone.EARLY if l in (0, num_layers - 1) else Zone.MIDDLE
        units.append(DecisionUnit((l,), zone, ZONE_ACTIONS[zone]))
    return SearchSpace(units)


def build_space(trace, *, zones: bool = True, groups: bool = True, settings: ZoneSettings = ZoneSettings(),
                metrics: Sequence[str] | None = SPACE_METRICS, zone_metric: str = "residual-ratio",
                group_metric: str = "ear-gain", metric_args: dict | None = None, low_bit: bool = False) -> SearchSpace:
    """LEAP's search space from a prefill trace (or a list of traces), built by
    :func:`leap.redundancy.build.space_from_traces`: ``zone_metric`` fills LEAP's R role, ``group_metric``
    its Delta L role; ``cosine`` is kept for the agents that rank units by it; ``metrics=None`` computes
    every registered metric (the environment's observation); ``low_bit`` adds the per-layer precision
    action."""
    return space_from_traces(trace, SpaceSettings(zone_metric, group_metric, metric_args or {}, settings, zones,
                                                  groups, low_bit), metrics)
