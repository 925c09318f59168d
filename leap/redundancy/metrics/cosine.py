"""``cosine``: mean cosine similarity of a layer's input and output over the last N positions.

The signal SWIFT and CLaSP rely on (and ShortGPT's Block Influence is 1 minus it): a layer whose output
points where its input did changes little. Higher = more redundant.
"""

from __future__ import annotations

import numpy as np
import torch

from leap.core.runtime.device import to_numpy
from leap.redundancy.base import RedundancyMetric, redundancy_metrics

__all__ = ["Cosine"]


@redundancy_metrics.register("cosine")
class Cosine(RedundancyMetric):
    """Cosine similarity of layer input and output; higher = more redundant."""

    name = "cosine"
    higher_is_redundant = True
    identity_is_most_redundant = True

    def compute(self, trace) -> np.ndarray:
        return to_numpy(torch.stack([
            torch.nn.functional.cosine_similarity(trace.hidden[l], trace.hidden[l + 1], dim=-1).mean()
            for l in range(trace.num_layers)
        ]))
