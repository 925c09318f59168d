"""Draft trees from the layers below an exit layer: :class:`ExitTreeLayers` and :func:`draft_exit_tree`.

An exit drafter (Kangaroo / DVI, :mod:`leap.heads.exit_drafter`) drafts with the model's layers below its
exit layer ``k`` and a head reading the residual stream entering ``k``. A chain costs one pass of those
layers per token. A tree (EAGLE-2's confidence-ordered expansion, :mod:`leap.heads.dynamic_tree`) costs one
pass per *depth*: the nodes of one depth run through the layers together, in the session's own KV cache,
with tree attention - each node sees the committed context, the pending token and its own ancestors, at the
position of its depth (the layout of :class:`~leap.core.trees.draft_tree.DraftTree`). The layers run under
the step's layer configuration (skipped layers append nothing, repeated ones their second pass, low-bit
ones their low-precision copies), so LEAP's search below ``k`` applies to trees as to chains.

Every draft entry is rolled back before the full model verifies the tree (:func:`draft_exit_tree` is a
context that always rolls back), so verification sees the cache invariant of
:mod:`leap.core.modeling.layers` and the output stays plain decoding's.

Who calls what: :meth:`leap.core.decoding.session.DecodingSession._step` calls :func:`draft_exit_tree` for a
drafter with an ``exit_layer`` and ``tree_nodes > 1`` under greedy decoding; it hands the drafter an
:class:`ExitTreeLayers` through :meth:`~leap.core.drafters.base.Drafter.propose_exit_tree`, and the drafter
calls :meth:`ExitTreeLayers.root` once and :meth:`ExitTreeLayers.expand` once per depth.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from leap.core.config import LayerConfig
from leap.core.modeling.layers import plan_for
from leap.core.modeling.low_bit_layers import replacements
from leap.core.trees.draft_tree import DraftTree

if TYPE_CHECKING:
    from leap.core.drafters import Drafter

__all__ = ["ExitTreeLayers", "draft_exit_tree"]


class ExitTreeLayers:
    """The layers below ``exit.exit_layer`` under ``cfg``, run over batches of tree nodes after the pending
    token ``pending`` (cache length ``base`` in every layer). Draft entries are numbered from 0 (the pending
    token); :meth:`expand` takes each new node's parent entry and returns the new nodes' entries."""

    def __init__(self, stack: Any, cache: Any, base: int, pending: int, cfg: LayerConfig, exit: Drafter,
                 low: dict | None = None) -> None:
        self.stack, self.cache, self.base, self.pending, self.exit = stack, cache, base, pending, exit
        passes = [a.passes for a in cfg.actions]
        self.k = exit.exit_layer
        self.plan = plan_for(passes, 0, self.k)
        self.passes_per_node = sum(passes[: self.k])  # decoder-layer passes of one node
        self.low = low
        self.rows = 0  # node rows run through the layers (the pending token's included)
        self._parent: list[int] = []  # draft entry -> its parent entry (-1: the pending token)
        self._depth: list[int] = []

    @property
    def layer_passes(self) -> int:
        """Decoder-layer passes spent so far (one per node row per executed pass below ``k``)."""
        return self.rows * self.passes_per_node

    def root(self) -> torch.Tensor:
        """Run the pending token; -> the exit's draft logits after it (``[1, V]``, float32). Entry 0."""
        if self._parent:
            raise RuntimeError("ExitTreeLayers.root() runs once, before any expand()")
        hidden = self.stack.run_layers(self.stack.embed([self.pending]), self.plan, self.cache, self.base,
                                       replace=self.low)
        self._parent.append(-1)
        self._depth.append(0)
        self.rows += 1
        return self.exit.exit_logits(hidden[:, -1:])

    def expand(self, tokens: Sequence[int], parents: Sequence[int]) -> tuple[torch.Tensor, list[int]]:
        """Run ``tokens``, the children of draft entries ``parents``, in one pass with tree attention; ->
        their exit logits (``[q, V]``) and their draft entries."""
        if not self._parent:
            raise RuntimeError("ExitTreeLayers.expand() needs root() first")
        q, past = len(tokens), len(self._parent)
        if any(not 0 <= p < past for p in parents) or len(parents) != q:
            raise ValueError(f"parents must be one existing entry (0..{past - 1}) per token, got {list(parents)}")
        visible = [[False] * (past + q) for _ in range(q)]  # draft entries only: small, built on the host
        for j, p in enumerate(parents):
            visible[j][past + j] = True
            while p >= 0:
                visible[j][p] = True
                p = self._parent[p]
        depths = [self._depth[p] + 1 for p in parents]
        stack = self.stack
        drafts = torch.zeros(q, past + q, dtype=stack.dtype)
        drafts.masked_fill_(~torch.tensor(visible, dtype=torch.bool), torch.finfo(stack.dtype).min)
        mask = torch.cat([torch.zeros(q, self.base, dtype=stack.dtype, device=stack.device),
                          drafts.to(stack.device)], dim=1).view(1, 1, q, -1)
        hidden = stack.run_layers(stack.embed(list(tokens)), self.plan, self.cache, self.base + past,
                                  positions=[self.base + d for d in depths], mask=mask, replace=self.low)
        self._parent.extend(parents)
        self._depth.extend(depths)
        self.rows += q
        return self.exit.exit_logits(hidden), list(range(past, past + q))

    def rollback(self) -> None:
        """Every layer below ``k`` back to ``base`` entries: no draft entry outlives the draft."""
        self.stack.rollback(self.cache, self.base, range(self.k))


def draft_exit_tree(session: Any, exit: Drafter, cfg: LayerConfig, base: int, max_depth: int) -> tuple[DraftTree, int]:
    """The exit drafter's tree for the session's next step, drafted under ``cfg`` below its exit layer; ->
    the tree and the decoder-layer passes it cost. The layers' draft entries are rolled back whatever
    happens (an exception in the drafter included)."""
    decoder = session.decoder
    low = replacements(decoder.model, cfg, decoder.low_bits) if cfg.low else None
    layers = ExitTreeLayers(session.stack, session.cache, base, session.tokens[base], cfg, exit, low)
    try:
        tree = exit.propose_exit_tree(layers, max_depth)
    finally:
        layers.rollback()
    return tree, layers.layer_passes
