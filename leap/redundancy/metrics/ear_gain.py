"""``ear-gain``: LEAP's accepted-length gain Delta L_l from the logit lens (Stage I).

Push layer ``l``'s output through the final norm and LM head; ``x_t`` = its argmax at position ``t``;
``alpha_t = min(1, p_final(x_t) / p_l(x_t))``; ``EAR_l = sum_t prod_{s<=t} alpha_s`` over the last N
positions (the expected accepted length if layer ``l`` drafted them, treating the positions as a
chain); ``Delta L_l = EAR_l - EAR_{l-1}``, ``Delta L_0 = EAR_0``. High Delta L = the layer adds
acceptance = important; so ``higher_is_redundant = False``.
"""

from __future__ import annotations

import numpy as np
import torch

from leap.core.runtime.device import to_numpy
from leap.redundancy.base import RedundancyMetric, redundancy_metrics

__all__ = ["EarGain", "expected_accept_lengths"]


def expected_accept_lengths(trace) -> np.ndarray:
    """``EAR_l`` for every layer ``l`` (one LM-head product over all layers at once)."""
    model = trace.model
    L = trace.num_layers
    with torch.inference_mode():
        outs = torch.stack([trace.layer_output(l) for l in range(L)]).to(model.dtype)  # [L, N, d]
        logits = model.lm_head(model.norm(outs)).float()  # [L, N, V]
        p_layer = torch.softmax(logits, dim=-1)
        p_final = p_layer[-1]  # the last layer's output is the full model's
        x = logits.argmax(dim=-1)  # [L, N]
        p_l_x = p_layer.gather(-1, x.unsqueeze(-1)).squeeze(-1)
        p_f_x = p_final.unsqueeze(0).expand_as(p_layer).gather(-1, x.unsqueeze(-1)).squeeze(-1)
        alpha = (p_f_x / (p_l_x + 1e-10)).clamp(max=1.0)
        return to_numpy(torch.cumprod(alpha, dim=1).sum(dim=1))


@redundancy_metrics.register("ear-gain")
class EarGain(RedundancyMetric):
    """LEAP's Delta L: gain in logit-lens expected accepted length; higher = more important."""

    name = "ear-gain"
    higher_is_redundant = False

    def importance(self, values) -> np.ndarray:
        """Raw values: LEAP's zone and group rules were written for this metric's own scale."""
        return np.asarray(values, dtype=float)

    def compute(self, trace) -> np.ndarray:
        ear = expected_accept_lengths(trace)
        return np.diff(ear, prepend=0.0)
