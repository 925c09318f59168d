"""Read-only model evaluations on a decoding session's committed context.

Some search methods score configurations without a draft/verify step: SWIFT by the *matchness* of a
teacher-forced draft over already generated tokens, CLaSP by comparing hidden states layer by layer.
:class:`ContextProbe` runs those evaluations on a *fork* of the session's KV cache: a new
cache whose layers share the first ``n`` committed entries and copy them on their first append
(:meth:`leap.core.modeling.kv_cache.LeapKVCache.fork`), so the session's cache is never modified.

Who calls what: :class:`leap.search.runner.OnlineSearch` hands a probe to agents through
``SearchAgent.on_prompt``; the SWIFT and CLaSP agents call :meth:`matchness`, :meth:`target_states`
and :meth:`run_layer`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from leap.core.config import LayerConfig
from leap.core.modeling.layers import plan_for
from leap.core.modeling.low_bit_layers import replacements

__all__ = ["ContextProbe", "Probe"]


@runtime_checkable
class Probe(Protocol):
    """What a search agent may ask of a prompt's context (``SearchAgent.on_prompt`` receives one).

    Agents use only this, never the decoder's internals; :class:`ContextProbe` implements it on a
    decoding session, and a test or a model-free loop can pass any object that does.
    """

    @property
    def committed(self) -> int:
        """Tokens whose keys/values are in the session's cache (all committed but the pending one)."""

    def matchness(self, config: LayerConfig, window: int = 32) -> float:
        """SWIFT's score of ``config``: the fraction of the last ``window`` committed tokens a teacher-forced
        draft under it predicts."""

    def target_states(self) -> tuple[list[torch.Tensor], int]:
        """The full model's per-layer states of the last cached token and that token's position."""

    def run_layer(self, layer: int, hidden: torch.Tensor, position: int) -> torch.Tensor:
        """One layer on ``hidden`` at ``position`` over the committed context (the session is untouched)."""


class ContextProbe:
    """Evaluations over ``session``'s committed tokens (see the module docstring)."""

    def __init__(self, session) -> None:
        self.session = session
        self.stack = session.stack
        self.forward_time_s = 0.0

    @property
    def committed(self) -> int:
        """Tokens whose KV entries are in the cache (all committed but the pending one)."""
        return len(self.session.tokens) - 1

    def fork(self, length: int):
        """A copy-on-write fork of the first ``length`` entries of every layer of the session's cache."""
        return self.session.cache.fork(length)

    def matchness(self, config: LayerConfig, window: int = 32) -> float:
        """SWIFT's score: the fraction of the last ``window`` committed tokens that a teacher-forced,
        parallel draft under ``config`` predicts as its argmax (greedy targets = committed tokens)."""
        tokens = self.session.tokens
        n = self.committed
        w = min(window, n - 1)
        if w < 1:
            return 0.0
        start = n - w - 1
        t0 = self.stack.clock()
        with torch.inference_mode():
            cache = self.fork(start)
            plan = plan_for([a.passes for a in config.actions])
            low = replacements(self.stack.model, config, self.session.decoder.low_bits) if config.low else None
            hidden = self.stack.run_layers(self.stack.embed(tokens[start : start + w]), plan, cache, start,
                                           replace=low)
            predicted = self.stack.logits(hidden).argmax(-1).tolist()
        self.forward_time_s += self.stack.clock() - t0
        target = tokens[start + 1 : start + 1 + w]
        return sum(p == t for p, t in zip(predicted, target)) / w

    def target_states(self) -> tuple[list[torch.Tensor], int]:
        """The full model's per-layer inputs (and final output) ``[1, 1, d]`` for the last cached token,
        and that token's position (CLaSP's h*_i)."""
        pos = self.committed - 1
        record: dict[int, torch.Tensor] = {}
        t0 = self.stack.clock()
        with torch.inference_mode():
            cache = self.fork(pos)
            out = self.stack.run_layers(
                self.stack.embed([self.session.tokens[pos]]), self.stack.full_plan, cache, pos, record=record
            )
        self.forward_time_s += self.stack.clock() - t0
        return [record[i] for i in range(self.stack.num_layers)] + [out], pos

    def run_layer(self, layer: int, hidden: torch.Tensor, position: int) -> torch.Tensor:
        """Layer ``layer`` on a ``[1, 1, d]`` hidden state at ``position``, attending to the committed
        context before it (a fresh fork each call)."""
        t0 = self.stack.clock()
        with torch.inference_mode():
            out = self.stack.run_layers(hidden, ((layer, 1),), self.fork(position), position)
        self.forward_time_s += self.stack.clock() - t0
        return out
