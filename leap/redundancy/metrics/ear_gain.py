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


def expected_accept_lengths(trace, chunk: int = 2048) -> np.ndarray:
    """``EAR_l`` for every layer ``l``.

    One pass over the LM head's rows in vocabulary chunks of ``chunk``, for all layers and positions at
    once, keeping each row's running max, argmax and rescaled sum of exponentials (an online
    log-sum-exp), so neither the ``[L, N, V]`` logits nor their softmax is ever materialised: the
    weights are read once and each chunk's logits stay in cache. ``log p_l(x) = z_l[x] - logsumexp(z_l)``;
    ``p_final(x_t)`` is the final layer's logit at each layer's draft ``x_t``, one dot product per
    (layer, position). The runner pays this inside every LEAP prompt's measured wall clock."""
    model = trace.model
    L = trace.num_layers
    weight = model.lm_head.weight
    bias = getattr(model.lm_head, "bias", None)
    with torch.inference_mode():
        outs = model.norm(torch.stack([trace.layer_output(l) for l in range(L)]).to(model.dtype))  # [L, N, d]
        rows = outs.reshape(-1, outs.shape[-1])
        top = torch.full((rows.shape[0],), -torch.inf, device=rows.device)
        total = torch.zeros(rows.shape[0], device=rows.device)  # sum of exp(z - top)
        x = torch.zeros(rows.shape[0], dtype=torch.long, device=rows.device)
        for a in range(0, weight.shape[0], chunk):
            z = torch.nn.functional.linear(rows, weight[a:a + chunk],
                                           None if bias is None else bias[a:a + chunk]).float()
            z_top, z_arg = z.max(dim=-1)
            new_top = torch.maximum(top, z_top)
            total = total * torch.exp(top - new_top) + torch.exp(z - new_top.unsqueeze(-1)).sum(dim=-1)
            x = torch.where(z_top > top, z_arg + a, x)  # ties keep the lower id, as argmax does
            top = new_top
        lse, top, x = (total.log() + top).view(L, -1), top.view(L, -1), x.view(L, -1)
        final_x = (weight[x] * outs[-1].unsqueeze(0)).sum(dim=-1).float()  # [L, N]: z_final[x_t]
        if bias is not None:
            final_x = final_x + bias[x].float()
        # alpha_t = min(1, p_final(x_t) / p_l(x_t)); the last layer's output is the full model's: alpha = 1
        alpha = torch.exp(((final_x - lse[-1]) - (top - lse)).clamp(max=0.0))
        alpha[-1] = 1.0
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
