"""``residual-ratio``: R_l = ||h_out - h_in||_F / (||h_in||_F + 1e-8) (LEAP, Stage I).

How much layer ``l`` changes its input over the last N prompt positions. High R = the layer does a lot
= important; so ``higher_is_redundant = False``.
"""

from __future__ import annotations

import numpy as np
import torch

from leap.core.runtime.device import to_numpy
from leap.redundancy.base import RedundancyMetric, redundancy_metrics

__all__ = ["ResidualRatio"]


@redundancy_metrics.register("residual-ratio")
class ResidualRatio(RedundancyMetric):
    """Relative change a layer makes to its input (LEAP's R_l); higher = more important."""

    name = "residual-ratio"
    higher_is_redundant = False
    identity_is_most_redundant = True

    def importance(self, values) -> np.ndarray:
        """Raw values: LEAP's zone and group rules were written for this metric's own scale."""
        return np.asarray(values, dtype=float)

    def compute(self, trace) -> np.ndarray:
        return to_numpy(torch.stack([
            (trace.hidden[l + 1] - trace.hidden[l]).norm() / (trace.hidden[l].norm() + 1e-8)
            for l in range(trace.num_layers)
        ]))
