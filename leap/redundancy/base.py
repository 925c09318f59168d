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

from collections.abc import Iterable

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


redundancy_metrics: Registry[type[RedundancyMetric]] = Registry(
    "redundancy metric",
    "leap.redundancy_metrics",
    builtin_modules=(
        "leap.redundancy.residual_ratio",
        "leap.redundancy.ear_gain",
        "leap.redundancy.cosine",
        "leap.redundancy.attention_entropy",
    ),
)


def make_metric(name: str) -> RedundancyMetric:
    return redundancy_metrics.create(name)


def compute_metrics(traces, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """``{name: values}`` for the named metrics (default: every registered one).

    ``traces`` is one :class:`~leap.core.trace.LayerTrace` or a sequence of them (several prompts),
    in which case each metric is the mean over traces.
    """
    batch = list(traces) if isinstance(traces, (list, tuple)) else [traces]
    out = {}
    for name in redundancy_metrics.names() if names is None else names:
        metric = make_metric(name)
        out[name] = np.mean([np.asarray(metric.compute(t), dtype=float) for t in batch], axis=0)
    return out
