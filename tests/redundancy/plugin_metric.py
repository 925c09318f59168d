"""A third-party metric, registered on import (tests/redundancy/test_analysis_cli.py loads it with --import)."""

import numpy as np

from leap.redundancy.base import RedundancyMetric, redundancy_metrics


@redundancy_metrics.register("test-layer-index", overwrite=True)
class LayerIndex(RedundancyMetric):
    """Later layers are more important (a test metric): importance = the layer's index."""

    higher_is_redundant = False

    def __init__(self, scale: float = 1.0):
        self.scale = float(scale)

    def compute(self, trace):
        return np.arange(trace.num_layers, dtype=float) * self.scale
