"""The redundancy-metric API and registry.

A :class:`RedundancyMetric` maps one :class:`~leap.redundancy.trace.LayerTrace` to one value per
layer and states its direction (``higher_is_redundant``). :meth:`RedundancyMetric.redundancy` flips
the sign where needed so that every metric can be ranked the same way (higher = more redundant).

Register with ``@redundancy_metrics.register("name")``; third-party metrics come through the
entry-point group ``leap.redundancy_metrics``. Every registered metric runs through the contract tests
in ``tests/redundancy/test_metric_contract.py`` automatically.

Who calls what: :func:`compute_metrics` (used by ``leap redundancy`` and the search-space builder)
instantiates each named metric and calls :meth:`RedundancyMetric.compute` on a trace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from leap.core.registry import Registry

__all__ = ["RedundancyMetric", "redundancy_metrics", "compute_metrics", "make_metric"]


class RedundancyMetric:
    """Base class. Subclasses set ``name``, ``higher_is_redundant`` and implement :meth:`compute`.

    A complete metric::

        @redundancy_metrics.register("output-norm")
        class OutputNorm(RedundancyMetric):
            \"\"\"Norm of each layer's output (an example, not a good metric).\"\"\"
            higher_is_redundant = False

            def compute(self, trace):
                return np.array([float(trace.layer_output(l).norm()) for l in range(trace.num_layers)])
    """

    name = "base"
    higher_is_redundant = True
    #: whether a layer made an identity (its output projections zeroed) must score most redundant;
    #: true for metrics of how much a layer changes its input, false for e.g. attention patterns.
    identity_is_most_redundant = False

    def compute(self, trace) -> np.ndarray:
        """One finite float per layer (shape ``[L]``)."""
        raise NotImplementedError

    def redundancy(self, trace) -> np.ndarray:
        """:meth:`compute`, negated when higher values mean *less* redundant."""
        values = np.asarray(self.compute(trace), dtype=float)
        return values if self.higher_is_redundant else -values

    def importance(self, values) -> np.ndarray:
        """Per-layer importance on the scale LEAP's zone and group rules read, from this metric's values
        (:mod:`leap.redundancy.build`): by default the negated redundancy scaled to [0, 1] (constant
        values give zeros). LEAP's own metrics override it to pass their raw values."""
        values = np.asarray(values, dtype=float)
        imp = -values if self.higher_is_redundant else values
        span = float(imp.max() - imp.min()) if imp.size else 0.0
        return (imp - imp.min()) / span if span > 0 else np.zeros_like(imp)


redundancy_metrics: Registry[type[RedundancyMetric]] = Registry(
    "redundancy metric",
    "leap.redundancy_metrics",
    builtin_modules=(
        "leap.redundancy.metrics.residual_ratio",
        "leap.redundancy.metrics.ear_gain",
        "leap.redundancy.metrics.cosine",
        "leap.redundancy.metrics.attention_entropy",
    ),
)


def make_metric(name: str, **kwargs) -> RedundancyMetric:
    """The metric called ``name``, built with constructor arguments ``kwargs``."""
    return redundancy_metrics.create(name, **kwargs)


def compute_metrics(traces, names: Iterable[str] | None = None,
                    metric_args: Mapping[str, Mapping] | None = None) -> dict[str, np.ndarray]:
    """``{name: values}`` for the named metrics (default: every registered one).

    ``traces`` is one :class:`~leap.core.modeling.trace.LayerTrace` or a sequence of them (several prompts),
    in which case each metric is the mean over traces. ``metric_args`` holds constructor arguments
    per metric name.
    """
    batch = list(traces) if isinstance(traces, (list, tuple)) else [traces]
    out = {}
    for name in redundancy_metrics.names() if names is None else names:
        metric = make_metric(name, **dict((metric_args or {}).get(name, {})))
        out[name] = np.mean([np.asarray(metric.compute(t), dtype=float) for t in batch], axis=0)
    return out
