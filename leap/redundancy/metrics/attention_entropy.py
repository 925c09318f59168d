"""``attention-entropy``: how diffusely a layer's heads attend, from the prefill's own keys.

For each of the last N prompt positions, recompute the layer's queries from the recorded layer input
(input norm, ``q_proj``, rotary embedding: the layer's own modules) and score them against the keys the
prefill cached; the entropy of each head's causal attention distribution is divided by ``log`` of the
number of visible keys (1 = uniform). Heads that spread attention evenly act like averaging, and
attention layers of that kind are the ones pruning studies drop first (He et al., 2024, "What Matters
in Transformers? Not All Attention is Needed"). Higher = more redundant. It complements the residual
metrics: a layer can change its input a lot through its MLP while its attention is nearly uniform.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from leap.core.runtime.device import to_numpy
from leap.redundancy.base import RedundancyMetric, redundancy_metrics

__all__ = ["AttentionEntropy"]


@redundancy_metrics.register("attention-entropy")
class AttentionEntropy(RedundancyMetric):
    """Normalised entropy of attention over visible keys, mean over heads and positions; higher = more redundant."""

    name = "attention-entropy"
    higher_is_redundant = True

    def compute(self, trace) -> np.ndarray:
        model = trace.model
        positions = torch.tensor(trace.positions, device=model.device).view(1, -1)
        values = []
        with torch.inference_mode():
            for l in range(trace.num_layers):
                q = model.attention_queries(l, trace.hidden[l], positions)  # [H, N, hd]
                keys = trace.keys[l].to(q.dtype)  # [KVH, P, hd]
                keys = keys.repeat_interleave(q.shape[0] // keys.shape[0], dim=0)
                scores = (q @ keys.transpose(-1, -2)).float() * model.attention_scaling(l)  # [H, N, P]
                visible = torch.arange(keys.shape[1], device=q.device).view(1, -1) <= positions.view(-1, 1)
                scores = scores.masked_fill(~visible, float("-inf"))
                p = torch.softmax(scores, dim=-1)
                entropy = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)  # [H, N]
                norm = torch.log(visible.sum(-1).float()).clamp_min(math.log(2))  # [N]
                values.append((entropy / norm).mean())
        return to_numpy(torch.stack(values))
