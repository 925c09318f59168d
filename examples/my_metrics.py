"""An example third-party redundancy metric (docs/agents.md, section 1b; docs/redundancy.md's ablation).

Load it with ``--import examples.my_metrics`` from the repository root.
"""

import numpy as np

from leap.redundancy.base import RedundancyMetric, redundancy_metrics


@redundancy_metrics.register("update-norm")
class UpdateNorm(RedundancyMetric):
    """Mean norm of what a layer adds to the residual stream; higher = more important."""

    higher_is_redundant = False

    def compute(self, trace):
        return np.array([float((trace.hidden[l + 1] - trace.hidden[l]).norm(dim=-1).mean().item())
                         for l in range(trace.num_layers)])
