"""Batched decoding over a static cache, its layers replayed as CUDA graphs: B > 1 as a sequence of replays.

A batch's eager forward (:class:`~leap.core.decoding.batch_state.BatchState`) launches every kernel from Python and
its key length changes at every step, so on a GPU it is launch-bound: on one H200 at B = 4, leap's batched plain
decoding took 20-25 ms a step where transformers' static-cache ``generate`` took 4
(``experiments/2026-11-28-gpu-regret``). Here the batch keeps the layout of
:mod:`leap.core.decoding.batch` - slots shared by the rows, a validity mask per row, holes masked, packing - on fixed
buffers, so that every forward of a width has the same shapes and addresses and each layer is one replay
(:class:`BatchGraphs`, the single request's :mod:`leap.core.modeling.graphs.engine` with a batch dimension):

- **Rows that finish stay** in the buffers as dead rows (their outputs are dropped and their queries see only
  themselves): a batch's shapes never change while rows leave, at the price of computing their rows until the batch
  ends. :meth:`StaticBatchState.select` only changes which buffer row each active row is.
- **A forward of ``q`` tokens a row is padded to its width's bucket** (1, 2, 4, ..., 32): the padded slots are written
  past the batch's slots, where the mask hides them and the next forward overwrites them; padded queries see only
  their own slot.
- **The mask spans the whole buffer**: each query sees its row's valid slots before it and the new slots up to its
  own (as the eager batch's), ``-inf`` elsewhere; attention weighs a masked slot by exactly 0, so entries left from a
  rollback, a skipped layer or an earlier batch are never read.
- **Rollback, packing and a layer draft's cache** move per-layer lengths and copy within the buffers
  (:meth:`StaticBatchState.compact` gathers in place, and packs after a step that leaves fewer than :data:`ROOM`
  free slots); nothing is reallocated while the graphs are bound.

Lossless as the eager batch: each row's logits are the same model over the same keys; only the float summation
order of attention over the longer (masked) key range differs, which the tests hold to token identity with decoding
each prompt alone (``tests/core/modeling/test_batch_graphs.py``).

When: every graph of the widths a batch can use is captured when a :class:`BatchGraphs` is made
(:meth:`BatchGraphs.prepare`), once per number of rows and capacity a :class:`~leap.core.decoding.batch.BatchDecoder`
meets (it keeps them across batches; a longer batch makes a larger one). The first replay of each graph is checked
against the same layer run eagerly; one that differs is dropped for good, said once, and its layer runs eagerly. Off a
GPU, :class:`~leap.core.modeling.graphs.engine.Replay` stands in for a CUDA graph, so all of this but the capture is
tested on the CPU.

Who calls what: :meth:`leap.core.decoding.batch.BatchDecoder.new_state` makes a :class:`StaticBatchState` (with
``graphs=True``) for each :class:`~leap.core.decoding.batch_session.BatchSession`.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import torch

from leap.core.decoding.batch_state import BatchState
from leap.core.modeling.direct.llama import layer_call
from leap.core.modeling.graphs.engine import WidthBuffers, bucket, replay_checked
from leap.core.modeling.graphs.static_cache import StaticKVCache
from leap.core.modeling.kv_cache import LeapKVCache
from leap.core.modeling.layers import LayerPlan, LayerStack

__all__ = ["BatchGraphs", "StaticBatchState", "BATCH_WIDTHS", "ROOM"]

#: the widths a batch's forwards are padded to and captured at (a chain cap of 16 verifies 17 tokens a row: 32)
BATCH_WIDTHS = (1, 2, 4, 8, 16, 32)

#: free slots kept after the batch's own: a step's draft (up to 31 tokens a row) and its verification (up to 32)
ROOM = 2 * BATCH_WIDTHS[-1]


class BatchGraphs:
    """Per-layer graphs over one static cache of ``rows`` rows and ``capacity`` slots (module docstring).

    Args:
        stack: the batch's layer stack (its model's layers, embedding and rotary tables).
        rows: the batch size the buffers hold.
        capacity: slots per layer.
    """

    def __init__(self, stack: LayerStack, rows: int, capacity: int) -> None:
        self.stack, self.rows, self.capacity, self.device = stack, int(rows), int(capacity), stack.device
        self.cache = StaticKVCache(stack.num_layers, self.capacity, self.device)
        self.graphs: dict[tuple[int, int], Any] = {}  # (layer, width) -> graph
        self.checked: set[tuple[int, int]] = set()  # graphs whose first replay matched the eager layer
        self.broken: set[tuple[int, int]] = set()  # graphs that did not (or could not be captured): eager
        self.buffers: dict[int, WidthBuffers] = {}
        self.pool = torch.cuda.graph_pool_handle() if self.device.type == "cuda" else None
        self.capture_s = 0.0
        self.holder: weakref.ref | None = None  # the state using the buffers now (one at a time)

    def free(self) -> bool:
        """Whether no live state holds the buffers."""
        return self.holder is None or self.holder() is None

    def reset(self) -> None:
        """Every layer empty (a new batch; the buffers and graphs stay)."""
        for layer in self.cache.layers:
            layer.length = 0

    def prepare(self) -> None:
        """Capture (and check) every layer's graph at every width of :data:`BATCH_WIDTHS` now, on random inputs at
        slot 0 (a new batch's prefill overwrites them), so that no batch captures inside its clock."""
        generator = torch.Generator(device=self.device).manual_seed(0)
        like = self.stack.model.embed_tokens.weight
        for width in BATCH_WIDTHS:
            if width > self.capacity:
                break
            positions = torch.arange(width, device=self.device).expand(self.rows, width)
            causal = torch.ones(width, width, dtype=torch.bool, device=self.device).tril()
            allowed = torch.zeros(self.rows, width, self.capacity, dtype=torch.bool, device=self.device)
            allowed[:, :, :width] = causal
            for index in range(self.stack.num_layers):
                hidden = torch.randn(self.rows, width, like.shape[-1], generator=generator,
                                     device=self.device).to(like.dtype)
                self.run(((index, 1),), hidden, positions, allowed, 0, width)
        self.reset()

    def run(self, plan: LayerPlan, hidden: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor, start: int,
            q: int) -> torch.Tensor:
        """``plan``'s layers over ``hidden`` (``[rows, width, H]``, written at slots ``start..start + width - 1``),
        each query seeing the slots ``allowed`` gives it (``[rows, width, capacity]``); every planned layer then holds
        ``start + q`` entries (what the padded queries wrote past them is masked and overwritten later). Returns the
        last layer's output ``[rows, width, H]``."""
        width = hidden.shape[1]
        cache = self.cache
        cache.begin(start, width, [index for index, _ in plan])
        bufs = self._buffers(width, hidden)
        bufs.hidden.copy_(hidden)
        bufs.position_ids.copy_(positions)
        cos, sin = self.stack.model.rotary_emb(hidden, position_ids=positions)
        bufs.cos.copy_(cos)
        bufs.sin.copy_(sin)
        bufs.mask.zero_().masked_fill_(~allowed[:, None], torch.finfo(self.stack.dtype).min)
        for index, passes in plan:
            for _ in range(passes):  # a repeated layer's second pass writes the same slots again
                self._layer(index, width, bufs)
                cache.layers[index].advance(start, q)
        return bufs.hidden.clone()

    def _buffers(self, width: int, like: torch.Tensor) -> WidthBuffers:
        bufs = self.buffers.get(width)
        if bufs is None:
            cos, _ = self.stack.model.rotary_emb(like[:, :1], position_ids=torch.zeros(
                like.shape[0], 1, dtype=torch.long, device=self.device))
            rows = self.rows
            bufs = self.buffers[width] = WidthBuffers(
                hidden=like.new_zeros(rows, width, like.shape[-1]),
                position_ids=torch.zeros(rows, width, dtype=torch.long, device=self.device),
                cos=cos.new_zeros(rows, width, cos.shape[-1]), sin=cos.new_zeros(rows, width, cos.shape[-1]),
                mask=like.new_zeros(rows, 1, width, self.capacity))
        return bufs

    def _layer(self, index: int, width: int, bufs: WidthBuffers) -> None:
        """Layer ``index`` over the width's buffers: a replay, captured on first use and checked on its first replay
        against the same layer run eagerly (as :meth:`LayerGraphs._layer
        <leap.core.modeling.graphs.engine.LayerGraphs._layer>`)."""
        layer, cache = self.stack.model.layers[index], self.cache

        def forward() -> torch.Tensor:
            return layer_call(layer, bufs.hidden, cache=cache, attention_mask=bufs.mask,
                              position_ids=bufs.position_ids, position_embeddings=(bufs.cos, bufs.sin))

        replay_checked(self, (index, width), forward, bufs.hidden, f"leap: batch graphs: layer {index}")


class StaticBatchState(BatchState):
    """:class:`~leap.core.decoding.batch_state.BatchState` on a :class:`BatchGraphs`' fixed buffers (module
    docstring). ``valid`` and ``slot_pos`` hold every buffer row, dead ones (finished requests) all invalid; the
    rows the session steps are :attr:`live`, in its order."""

    def __init__(self, stack: LayerStack, graphs: BatchGraphs) -> None:  # noqa: D107 - BatchState's, on the buffers
        self.stack, self.graphs = stack, graphs
        graphs.reset()
        graphs.holder = weakref.ref(self)
        self.cache = graphs.cache
        self.live = list(range(graphs.rows))  #: the buffer row of each row still decoding
        self._index()
        self.valid = torch.zeros(graphs.rows, 0, dtype=torch.bool, device=stack.device)
        self.slot_pos = torch.zeros(graphs.rows, 0, dtype=torch.long, device=stack.device)

    def _index(self) -> None:
        """The device-side forms of :attr:`live` every forward reads, made when it changes (not once a forward): the
        live rows' indices, and the dead rows' (``[dead, 1]``) or None."""
        dev = self.stack.device
        self._live = torch.as_tensor(self.live, device=dev)
        gone = sorted(set(range(self.graphs.rows)) - set(self.live))
        self._gone = torch.as_tensor(gone, device=dev)[:, None] if gone else None

    def _fits(self, width: int) -> None:
        """Refuse a forward of ``width`` slots past the buffers (:meth:`keep` packs before it could come to that)."""
        if self.slots + width > self.graphs.capacity:
            raise RuntimeError(f"a batch forward of {width} tokens at slot {self.slots} would pass the static "
                               f"cache's {self.graphs.capacity} slots; please report it: "
                               "leap/core/modeling/graphs/batch.py")

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, new_valid: torch.Tensor) -> torch.Tensor:
        q = ids.shape[1]
        width = bucket(q)
        self._fits(width)
        rows, live, dev = self.graphs.rows, self._live, self.valid.device
        start = self.slots
        full_ids = torch.zeros(rows, width, dtype=torch.long, device=dev)
        full_ids[live, :q] = ids.to(dev)
        full_pos = torch.zeros(rows, width, dtype=torch.long, device=dev)
        pad = positions[:, -1:].to(dev) + torch.arange(1, width - q + 1, device=dev)[None]  # padded: later positions
        full_pos[live] = torch.cat([positions.to(dev), pad], dim=1)
        valid_new = torch.zeros(rows, q, dtype=torch.bool, device=dev)
        valid_new[live] = new_valid.to(dev)
        self.valid = torch.cat([self.valid, valid_new], dim=1)
        self.slot_pos = torch.cat([self.slot_pos, full_pos[:, :q]], dim=1)
        hidden = self._run(self.stack.full_plan, full_ids, full_pos, self.valid, start, q)
        return hidden[live, :q]

    def draft_forward(self, plan: LayerPlan, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        drafted = positions.shape[1]  # the draft tokens fed before this one, and this one
        self._fits(drafted)
        rows, live, dev = self.graphs.rows, self._live, self.valid.device
        start = self.slots + drafted - 1
        full_ids = torch.zeros(rows, 1, dtype=torch.long, device=dev)
        full_ids[live] = ids.to(dev)
        full_pos = torch.zeros(rows, 1, dtype=torch.long, device=dev)
        full_pos[live] = positions[:, -1:].to(dev)
        valid = torch.cat([self.valid, torch.ones(rows, drafted, dtype=torch.bool, device=dev)], dim=1)
        hidden = self._run(plan, full_ids, full_pos, valid, start, 1)
        return hidden[live]

    def drop_draft(self) -> None:
        for layer in self.cache.layers:
            layer.length = min(layer.length, self.slots)

    def _run(self, plan: LayerPlan, ids: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor, start: int,
             q: int) -> torch.Tensor:
        """``plan``'s layers over ``ids`` (``[rows, width]``: ``q`` real tokens a row written at ``start``, which
        ``valid``'s last ``q`` columns describe), each real query seeing its row's valid slots up to itself, a padded
        query or a dead row's only its own slot."""
        graphs, dev = self.graphs, self.valid.device
        rows, width = ids.shape
        allowed = torch.zeros(rows, width, graphs.capacity, dtype=torch.bool, device=dev)
        causal = torch.ones(q, q, dtype=torch.bool, device=dev).tril()
        allowed[:, :q, : start + q] = valid[:, None, : start + q] & torch.cat(
            [torch.ones(q, start, dtype=torch.bool, device=dev), causal], dim=1)[None]
        own = torch.arange(width, device=dev)
        allowed[:, own[q:], start + own[q:]] = True  # a padded query: its own slot
        gone = self._gone
        if gone is not None:  # a finished request's row: every query its own slot
            allowed[gone[:, 0]] = False
            allowed[gone, own[None], start + own[None]] = True
        hidden = self.stack.model.embed_tokens(ids)
        return graphs.run(plan, hidden, positions, allowed, start, q)

    def _lay_out(self, caches: Sequence[LeapKVCache], width: int) -> None:
        """:meth:`BatchState.prefill`'s layout, written at the static buffers' first ``width`` slots."""
        self._fits(width + ROOM)
        self.cache.begin(0, width, [])
        super()._lay_out(caches, width)
        for layer in self.cache.layers:
            layer.advance(0, width)

    def keep(self, start: int, kept: Sequence[int]) -> None:
        full = torch.zeros(self.graphs.rows, dtype=torch.long, device=self.valid.device)
        full[self._live] = torch.as_tensor(list(kept), device=self.valid.device)
        end = start + max(kept)
        offsets = torch.arange(self.slots - start, device=self.valid.device)
        self.valid[:, start:] &= offsets[None, :] < full[:, None]
        self.valid, self.slot_pos = self.valid[:, :end], self.slot_pos[:, :end]
        self.stack.rollback(self.cache, end)
        if self.slots + ROOM > self.graphs.capacity:  # the next step's draft and verification need ROOM slots
            self.compact()

    def compact(self) -> None:
        """Pack each row's valid slots to the front, in order, copying within the buffers."""
        counts = self.valid.sum(dim=1)
        n = counts.max().item()  # one read, when packing
        index = torch.argsort((~self.valid).to(torch.int8), dim=1, stable=True)[:, :n]
        for layer in self.cache.layers:
            if layer._keys is None or layer.length < self.slots:
                continue  # a layer a batch never ran (or one a draft's plan left behind) holds nothing to pack
            for buffer in (layer._keys, layer._values):
                gathered = buffer[:, :, : self.slots].gather(
                    2, index[:, None, :, None].expand(buffer.shape[0], buffer.shape[1], n, buffer.shape[3]))
                buffer[:, :, :n].copy_(gathered)
            layer.length = n
        self.slot_pos = self.slot_pos.gather(1, index)
        self.valid = torch.arange(n, device=self.valid.device)[None, :] < counts[:, None]

    def select(self, rows: Sequence[int]) -> None:
        """Keep only the active rows ``rows`` (indices into :attr:`live`); the others' buffer rows stay, dead."""
        leaving = set(range(len(self.live))) - {int(r) for r in rows}
        dead = [self.live[i] for i in leaving]
        self.live = [self.live[int(r)] for r in rows]
        self._index()
        if dead:
            self.valid[torch.as_tensor(dead, device=self.valid.device)] = False
