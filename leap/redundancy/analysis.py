"""Redundancy analysis over a prompt set: per-layer metrics, zones and groups per category, and
LEAP's Observation 1 (metrics measured at prefill rank layers like the same metrics measured later).

Observation 1 (LEAP, Stage I motivation): if a metric computed once at prefill ranks layers the same
way as the metric computed after ``s`` decoded tokens, a single prefill suffices to build the search
space. :func:`observation1` measures the Spearman rank correlation between the prefill metric vector
and the one computed on the trace of the last N positions after ``s`` greedy tokens, per metric,
category and ``s``.

Who calls what: ``leap redundancy`` calls :func:`analyse` (and :func:`observation1` with ``--plot``
or ``--observation1``); :mod:`leap.redundancy.plots` draws the results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.modeling.model import LeapModel
from leap.core.modeling.trace import capture_trace
from leap.redundancy.base import compute_metrics, redundancy_metrics
from leap.redundancy.build import SpaceSettings, space_from_metrics
from leap.redundancy.zones import ZoneSettings

__all__ = ["RedundancyReport", "analyse", "observation1", "prompt_ids"]


def prompt_ids(model: LeapModel, row: dict, chat: bool = True) -> list[int]:
    """Token ids of a Spec-Bench row's first turn (chat template applied when the model has one)."""
    return model.encode(row["turns"][0], chat=chat and bool(getattr(model.tokenizer, "chat_template", None)))


@dataclass
class RedundancyReport:
    """Mean metrics, zones and groups overall and per category (``to_dict`` is ``leap redundancy --json``)."""

    model: str
    num_layers: int
    prompts: int
    metrics: dict[str, list[float]]
    zones: list[str]
    groups: list[list[int]]
    space_size: int
    by_category: dict[str, dict] = field(default_factory=dict)
    observation1: dict = field(default_factory=dict)
    zone_metric: str = "residual-ratio"
    group_metric: str = "ear-gain"

    @property
    def zone_agreement(self) -> dict[str, float]:
        """Per category: the fraction of layers whose zone matches the all-prompt zone."""
        return {
            cat: float(np.mean([a == b for a, b in zip(info["zones"], self.zones)]))
            for cat, info in self.by_category.items()
        }

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "num_layers": self.num_layers,
            "prompts": self.prompts,
            "metrics": self.metrics,
            "zones": self.zones,
            "groups": self.groups,
            "space_size": self.space_size,
            "by_category": self.by_category,
            "zone_agreement": self.zone_agreement,
            "observation1": self.observation1,
            "zone_metric": self.zone_metric,
            "group_metric": self.group_metric,
        }


def _space(metrics: dict[str, np.ndarray], settings: SpaceSettings):
    return space_from_metrics(metrics, settings)


def analyse(
    model: LeapModel,
    rows: Sequence[dict],
    *,
    positions: int = 8,
    settings: ZoneSettings = ZoneSettings(),
    zones: bool = True,
    groups: bool = True,
    chat: bool = True,
    progress: Callable[[str], None] | None = None,
    zone_metric: str = "residual-ratio",
    group_metric: str = "ear-gain",
    metric_args: dict | None = None,
) -> RedundancyReport:
    """Metrics from one prefill per prompt (the decoder's own), averaged overall and per category;
    zones and groups from ``zone_metric`` / ``group_metric`` (:mod:`leap.redundancy.build`)."""
    space_settings = SpaceSettings(zone_metric, group_metric, metric_args or {}, settings, zones, groups)
    decoder = SelfSpecDecoder(model, None)
    traces: dict[str, list] = {}
    for row in rows:
        session = decoder.start(prompt_ids(model, row, chat), max_new_tokens=1, trace_positions=positions)
        traces.setdefault(row["category"], []).append(session.trace)
        if progress:
            progress(row["category"])
    everything = [t for ts in traces.values() for t in ts]
    overall = compute_metrics(everything, metric_args=metric_args)
    space = _space(overall, space_settings)
    by_category = {}
    for cat, ts in traces.items():
        m = compute_metrics(ts, metric_args=metric_args)
        s = _space(m, space_settings)
        by_category[cat] = {
            "prompts": len(ts),
            "zones": [z.value for z in s.zones],
            "groups": s.groups,
            "metrics": {k: v.tolist() for k, v in m.items()},
        }
    return RedundancyReport(
        model=model.name, num_layers=model.num_layers, prompts=len(everything),
        metrics={k: v.tolist() for k, v in overall.items()}, zones=[z.value for z in space.zones],
        groups=space.groups, space_size=space.size(), by_category=by_category, zone_metric=zone_metric,
        group_metric=group_metric,
    )


def observation1(
    model: LeapModel,
    rows: Sequence[dict],
    *,
    steps: Sequence[int] = (16, 32, 64),
    positions: int = 8,
    chat: bool = True,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Spearman correlation of each metric at prefill with the same metric after ``s`` decoded tokens.

    Returns ``{"steps": [...], "by_metric": {metric: {category: {s: mean rho}}}, "overall": {metric:
    {s: mean rho}}}``; correlations average over the prompts that decoded at least ``s`` tokens.
    """
    names = redundancy_metrics.names()
    rho: dict[str, dict[str, dict[int, list[float]]]] = {n: {} for n in names}
    decoder = SelfSpecDecoder(model, None)
    for row in rows:
        ids = prompt_ids(model, row, chat)
        at_prefill = compute_metrics(capture_trace(model, ids, positions))
        new = decoder.generate(ids, max_new_tokens=max(steps)).token_ids
        for s in steps:
            if len(new) < s:
                continue
            later = compute_metrics(capture_trace(model, ids + new[:s], positions))
            for n in names:
                r = stats.spearmanr(at_prefill[n], later[n]).statistic
                rho[n].setdefault(row["category"], {}).setdefault(s, []).append(float(r))
        if progress:
            progress(row["category"])
    by_metric = {n: {c: {s: float(np.mean(v)) for s, v in d.items()} for c, d in cats.items()} for n, cats in rho.items()}
    overall = {
        n: {s: float(np.mean([x for d in cats.values() for x in d.get(s, [])])) for s in steps
            if any(d.get(s) for d in cats.values())}
        for n, cats in rho.items()
    }
    return {"steps": list(steps), "by_metric": by_metric, "overall": overall}
