"""A static, position-indexed KV cache: fixed buffers, writes at device-side slots, attention over the whole buffer.

Why: a CUDA graph replays kernels on the same addresses and shapes. :class:`~leap.core.modeling.kv_cache.LeapKVCache`
appends at its host-side length and hands attention a view of that length, so every step has other shapes.
:class:`StaticKVCache` keeps one ``[batch, kv_heads, capacity, head_dim]`` buffer pair per layer, reserved once (the
prompt, the new tokens and the widest draft), and writes a forward's ``q`` keys and values at the slots in
:attr:`StaticKVCache.slots` (a device tensor: ``start .. start + q - 1``, the positions' slots) with ``index_copy_``.
Attention reads the whole buffer; the additive mask the layer stack pads to the capacity
(:meth:`StaticKVCache.pad_mask`) hides every slot after the query's own, so entries a rollback left behind (a rejected
draft's, a skipped layer's stale ones) are never seen and are simply overwritten by the next write there. A forward
over a given width therefore has the same shapes and addresses at every position: what
:mod:`leap.core.modeling.graphs` captures once per (layer, width) and replays.

Bookkeeping stays on the host and matches ``LeapKVCache``'s: each layer's ``length`` (what a rollback moves; no copy),
so drafts that skip, repeat or reuse an exact prefix keep per-layer lengths as before. The layer stack sets the slots
before a forward (:meth:`StaticKVCache.begin`) and the lengths after each layer (:meth:`StaticKVLayer.advance`), never
inside a layer: a replayed graph runs no Python. A layer that runs at ``start`` while it holds fewer than ``start``
entries would read slots nobody wrote: that is refused (:class:`StaleSlotError`), not read.

Who calls what: :meth:`leap.core.modeling.layers.LayerStack.new_cache` builds one when the stack's engine is
``static``; the attention modules (transformers' or leap's direct layers) call :meth:`StaticKVLayer.append`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from leap.core.modeling.kv_cache import KVLayer, LeapKVCache

__all__ = ["StaticKVLayer", "StaticKVCache", "StaleSlotError", "DRAFT_SLACK"]

#: slots reserved beyond the session's tokens, for the widest draft a step verifies (a tree's nodes)
DRAFT_SLACK = 64


class StaleSlotError(RuntimeError):
    """A layer ran at a position past what its cache holds: it would attend over slots no forward wrote."""


class StaticKVLayer(KVLayer):
    """One layer's fixed ``[batch, kv_heads, capacity, head_dim]`` buffers, written at the cache's slots."""

    def __init__(self, owner: StaticKVCache, capacity: int) -> None:
        super().__init__(capacity)
        self.owner = owner

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``[batch, kv_heads, q, head_dim]`` at the cache's slots; return the whole buffers (attention masks
        what is not this query's). Runs no host bookkeeping (a graph replays it): :meth:`advance` does."""
        owner = self.owner
        if self._keys is None or self._shared or self.capacity != owner.capacity:
            self._reserve(keys, owner.capacity)
        self._keys.index_copy_(2, owner.slots, keys)
        self._values.index_copy_(2, owner.slots, values)
        return self._keys, self._values

    def _reserve(self, like: torch.Tensor, needed: int) -> None:
        """Zeroed buffers (attention weighs masked slots by exactly 0, and 0 x a finite value is 0): a first write,
        a fork's first write (copy on write), or a capacity exceeded (grown, and the cache's ``generation`` moves on,
        so captured graphs over the old buffers are captured again)."""
        shape = (like.shape[0], like.shape[1], max(int(needed), self.owner.capacity, self.length), like.shape[3])
        keys, values = like.new_zeros(shape), like.new_zeros(shape)
        if self._keys is not None and self.length:
            keys[:, :, : self.length].copy_(self._keys[:, :, : self.length])
            values[:, :, : self.length].copy_(self._values[:, :, : self.length])
        if self._keys is not None:
            self.owner.generation += 1
        self._keys, self._values, self._shared = keys, values, False

    def advance(self, start: int, q: int) -> None:
        """After a forward of ``q`` tokens at ``start``: this layer holds ``start + q`` entries."""
        self.length = start + q

    def fork(self, length: int) -> StaticKVLayer:
        child = StaticKVLayer(self.owner, self.owner.capacity)
        if self._keys is not None:
            child._keys, child._values, child._shared = self._keys, self._values, True
            child.length = max(0, min(int(length), self.length))
        return child


class StaticKVCache(LeapKVCache):
    """Per-layer static buffers written at device-side slots (see the module docstring).

    Args:
        num_layers: decoder layers.
        capacity: slots per layer, reserved on first use (the session's tokens plus :data:`DRAFT_SLACK`).
        device: where the slots live (the model's device).
    """

    def __init__(self, num_layers: int, capacity: int, device: torch.device | str = "cpu") -> None:
        self.capacity = max(int(capacity), 1)
        self.device = torch.device(device)
        self.layers = [StaticKVLayer(self, self.capacity) for _ in range(num_layers)]
        self._slot_buffers: dict[int, torch.Tensor] = {}
        self.slots = torch.zeros(0, dtype=torch.long, device=self.device)  # this forward's slots
        self.start = self.end = 0
        self.generation = 0  # moves on whenever a buffer is reallocated (growth, copy on write)

    def begin(self, start: int, q: int, layers: Sequence[int]) -> None:
        """A forward of ``q`` tokens at slots ``start..start + q - 1`` through ``layers``: sets the slots, and refuses
        a layer that would read a slot no forward wrote (it holds fewer than ``start`` entries)."""
        for i in layers:
            held = self.layers[i].length
            if held < start:
                raise StaleSlotError(f"layer {i} holds {held} entries but runs at position {start}: it would attend "
                                     f"over slots {held}..{start - 1}, which no forward wrote")
        self.start, self.end = int(start), int(start) + int(q)
        slots = self._slot_buffers.get(q)
        if slots is None:  # one buffer per width, written in place: a captured graph reads it at one address
            slots = self._slot_buffers[q] = torch.empty(q, dtype=torch.long, device=self.device)
        torch.arange(self.start, self.end, out=slots)
        self.slots = slots
        if self.end > self.capacity:  # the buffers grow on their next write; masks follow
            self.capacity = max(self.end, 2 * self.capacity)

    def pad_mask(self, mask: torch.Tensor | None, q: int, dtype: torch.dtype) -> torch.Tensor:
        """The additive mask over the whole buffer: ``mask`` (over the ``start + q`` keys the eager cache would hold;
        None: causal) followed by ``-inf`` (the dtype's minimum) over every later slot."""
        start, cap = self.start, self.buffer_slots()
        minimum = torch.finfo(dtype).min
        if mask is None:
            k = torch.arange(cap, device=self.device).view(1, -1)
            queries = torch.arange(start, start + q, device=self.device).view(-1, 1)
            return torch.zeros(q, cap, dtype=dtype, device=self.device).masked_fill_(k > queries, minimum).view(
                1, 1, q, cap)
        out = torch.full((*mask.shape[:-1], cap), minimum, dtype=dtype, device=self.device)
        out[..., : mask.shape[-1]] = mask
        return out

    def buffer_slots(self) -> int:
        """Slots in each layer's buffer once written: the capacity (grown when a forward needs more)."""
        return self.capacity

    def fork(self, length: int) -> StaticKVCache:
        """A copy-on-write view of every layer's first ``length`` entries."""
        forked = StaticKVCache(0, self.capacity, self.device)
        forked.layers = [layer.fork(length) for layer in self.layers]
        for layer in forked.layers:
            layer.owner = forked
        return forked

    def select_rows(self, index: torch.Tensor) -> None:  # pragma: no cover - a static batch keeps its rows
        raise NotImplementedError("a batch on static buffers keeps finished rows as dead rows "
                                  "(leap.core.modeling.graphs.batch.StaticBatchState.select)")

    def gather_slots(self, index: torch.Tensor) -> None:  # pragma: no cover - a static batch packs in place
        raise NotImplementedError("a batch on static buffers packs within them "
                                  "(leap.core.modeling.graphs.batch.StaticBatchState.compact)")
