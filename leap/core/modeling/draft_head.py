"""A draft LM head restricted to a subset of the vocabulary.

The LM head of SmolLM2 (49,152 x 576) is about a fifth of a float32 forward on a small CPU. A draft
that scores only ``N`` frequent tokens pays ``N / V`` of that. It stays lossless: the verifier always
uses the full head, so a draft token outside the true argmax is simply rejected, and speculative
sampling treats tokens outside the subset as ``q = 0`` (the residual distribution covers them).

Which tokens: the first ``N`` ids (byte-level BPE vocabularies are ordered by merge rank, so low ids
are the frequent ones), plus every token of the prompt, plus the EOS tokens. This is a heuristic; pass
explicit ``token_ids`` to use a frequency list of your own.

Who calls what: :class:`leap.core.decoding.decoder.DecodingSession` builds one per prompt when the decoder has
``draft_vocab`` set, and calls it in place of the full LM head while drafting.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from leap.core.modeling.fast_linear import OneDNNLinear

__all__ = ["DraftHead"]


class DraftHead(nn.Module):
    """``hidden -> logits`` over ``token_ids`` only, scattered back to full-vocabulary positions."""

    def __init__(self, lm_head: nn.Module, token_ids: Iterable[int]) -> None:
        super().__init__()
        weight = lm_head.weight
        vocab = weight.shape[0]
        ids = sorted({int(i) for i in token_ids if 0 <= int(i) < vocab})
        if not ids:
            raise ValueError("a draft head needs at least one token id")
        self.vocab_size = vocab
        self.token_ids = torch.tensor(ids, dtype=torch.long, device=weight.device)
        sub = nn.Linear(weight.shape[1], len(ids), bias=False, device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            sub.weight.copy_(weight.detach()[self.token_ids])
        # packed like the model's own head: where load_model measured torch's linears faster, they stay
        self.proj: nn.Module = OneDNNLinear(sub) if isinstance(lm_head, OneDNNLinear) else sub

    @classmethod
    def lowest_ids(
        cls, lm_head: nn.Module, size: int, extra_ids: Iterable[int] = ()
    ) -> DraftHead:
        """The ``size`` lowest ids (for merge-rank-ordered BPE vocabularies, a proxy for the most
        frequent tokens; no frequency is counted) plus ``extra_ids`` (the prompt, EOS)."""
        return cls(lm_head, list(range(size)) + list(extra_ids))

    frequent = lowest_ids  # the earlier name, kept for users' code: it never counted frequencies

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        sub_logits = self.proj(hidden)
        out = torch.full(
            (*sub_logits.shape[:-1], self.vocab_size), float("-inf"), dtype=sub_logits.dtype,
            device=sub_logits.device,
        )
        out[..., self.token_ids] = sub_logits
        return out
