"""A per-layer KV cache written in place, and grouped-query attention that reads it without copies.

Why (measured on this project's 2-core CPU, SmolLM2-135M, float32, ``python benchmarks/core_bench.py
--section forward``): with transformers' ``DynamicCache`` every layer ``torch.cat``-s its whole cache
into a new tensor on every step, and with an attention mask (any verification of more than one
token) transformers' SDPA wrapper expands the 3 key/value heads to the 9 query heads (``repeat_kv``)
- a copy of the whole cache per layer per step. Profiled, those copies were about 30% of a one-token
forward and 30% of a four-token verification. Speculative decoding rolls the cache back on every
step, so a cache that is a preallocated buffer plus a length is both simpler and faster:

* :class:`LeapKVCache` - one :class:`KVLayer` per decoder layer, each a ``[batch, kv_heads,
  capacity, head_dim]`` buffer pair and a length. Appending copies only the new entries; a rollback
  (``crop``) only moves the length. The buffer grows by doubling when a capacity was not given.
  It duck-types the part of transformers' ``Cache`` that attention modules call (``update``).
* :func:`leap_sdpa_attention` - registered with transformers as the ``"leap_sdpa"`` attention
  implementation. When called from leap's :class:`~leap.core.modeling.layers.LayerStack` (keyword
  ``leap_layerwise=True``), it calls ``torch.nn.functional.scaled_dot_product_attention`` with
  ``enable_gqa=True`` and the additive mask, so keys and values are never expanded; layers that
  declare a sliding window (Mistral, Qwen2 with ``use_sliding_window``) get the stack's windowed mask
  (:meth:`leap.core.modeling.layers.LayerStack.run_layers`). Any other
  caller (``model.generate``, the transformers peers in ``leap bench``) gets transformers' own
  ``sdpa_attention_forward`` unchanged.

Numerics: the same float32 SDPA kernel on the same values; grouped heads are read in place instead of
from an expanded copy, which does not change any sum. leap's losslessness tests run through this path.

Forks (:meth:`LeapKVCache.fork`, used by :class:`leap.core.modeling.probe.ContextProbe`): a fork's layers share
the parent's buffers up to a length and copy them on their first append (copy on write), so
evaluations on a fork never touch the session's cache.

Eager attention on CUDA (:func:`eager_attention`): PyTorch picks cuDNN's attention for a masked bfloat16 SDPA on an
H100 or H200, and cuDNN builds an execution plan for every new shape - on one H200 about 75 ms, where the step itself
takes 20 (``python experiments/2026-11-28-gpu-regret/batch_plain_probe.py cuda smollm2-135m``: a batch of four's first
64 steps at new key lengths 94 ms a step, the same steps again 19.5; without cuDNN's attention 28.7 the first time and
25 again). An eager forward's key length grows every step, so nearly every step built a plan. Eager forwards therefore
run with the other kernels (flash, memory-efficient, math); graph captures (fixed shapes, planned once) keep cuDNN.
``LEAP_CUDNN_ATTENTION=1`` is the ablation.

Who calls what: :meth:`leap.core.modeling.layers.LayerStack.new_cache` builds a :class:`LeapKVCache`;
:func:`leap.core.modeling.model.wrap_model` calls :func:`install_attention`;
:meth:`~leap.core.modeling.layers.LayerStack.run_layers` (its eager branch) and
:class:`~leap.core.decoding.batch_state.BatchState` run their layers under :func:`eager_attention`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

import torch

from leap.core.modeling.hf_interface import register_attention, sdpa_attention_forward

__all__ = ["KVLayer", "LeapKVCache", "PromptKV", "leap_sdpa_attention", "install_attention", "ATTENTION_NAME",
           "eager_attention"]

ATTENTION_NAME = "leap_sdpa"


class KVLayer:
    """One layer's keys and values: ``[batch, kv_heads, capacity, head_dim]`` buffers and a length.

    ``keys``/``values`` are views of the first ``length`` entries (like ``DynamicLayer``'s tensors).
    """

    def __init__(self, capacity: int = 0) -> None:
        self._capacity_hint = max(int(capacity), 0)
        self._keys: torch.Tensor | None = None
        self._values: torch.Tensor | None = None
        self._shared = False  # buffers belong to another cache (a fork): copy before writing
        self.length = 0

    # ---------------------------------------------------------------- transformers-like view
    @property
    def is_initialized(self) -> bool:
        return self._keys is not None

    @property
    def keys(self) -> torch.Tensor | None:
        return None if self._keys is None else self._keys[:, :, : self.length]

    @property
    def values(self) -> torch.Tensor | None:
        return None if self._values is None else self._values[:, :, : self.length]

    @property
    def capacity(self) -> int:
        return 0 if self._keys is None else int(self._keys.shape[2])

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, max_length: int) -> None:
        """Keep the first ``max_length`` entries; a negative value drops that many from the end
        (``DynamicLayer.crop``'s convention)."""
        keep = self.length + max_length if max_length < 0 else max_length
        self.length = max(0, min(self.length, keep))

    # ---------------------------------------------------------------- writing
    def _reserve(self, like: torch.Tensor, needed: int) -> None:
        if self._keys is not None and not self._shared and needed <= self.capacity:
            return
        capacity = max(needed, self._capacity_hint, 2 * self.capacity, 64)
        shape = (like.shape[0], like.shape[1], capacity, like.shape[3])
        keys = like.new_empty(shape)
        values = like.new_empty(shape)
        if self._keys is not None and self.length:
            keys[:, :, : self.length].copy_(self._keys[:, :, : self.length])
            values[:, :, : self.length].copy_(self._values[:, :, : self.length])
        self._keys, self._values, self._shared = keys, values, False

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``[batch, kv_heads, q, head_dim]`` after the current entries; return all entries."""
        end = self.length + keys.shape[2]
        self._reserve(keys, end)
        self._keys[:, :, self.length : end].copy_(keys)
        self._values[:, :, self.length : end].copy_(values)
        self.length = end
        return self._keys[:, :, :end], self._values[:, :, :end]

    def keep(self, dest: int, sources: Sequence[int]) -> None:
        """Move the entries at positions ``sources`` (increasing, each >= its destination) to
        ``dest, dest + 1, ...`` - a draft tree's accepted path, made contiguous after verification."""
        sources = [int(s) for s in sources]
        if self._keys is None or sources == list(range(dest, dest + len(sources))):
            return
        if self._shared:
            self._reserve(self._keys, self.length)
        index = torch.tensor(sources, device=self._keys.device)
        end = dest + len(sources)
        self._keys[:, :, dest:end] = self._keys.index_select(2, index)
        self._values[:, :, dest:end] = self._values.index_select(2, index)

    def advance(self, start: int, q: int) -> None:
        """After a forward of ``q`` tokens at ``start`` (the layer stack calls it): :meth:`append` already moved the
        length here; a static cache's layer moves it now (:mod:`leap.core.modeling.graphs.static_cache`)."""

    def select_rows(self, index: torch.Tensor) -> None:
        """Keep the batch rows ``index`` (a batch's finished requests leave it; :mod:`leap.core.decoding.batch`)."""
        if self._keys is not None:
            self._keys, self._values = self._keys.index_select(0, index), self._values.index_select(0, index)
            self._shared = False

    def gather_slots(self, index: torch.Tensor) -> None:
        """Row ``r``'s entries become its entries at ``index[r]`` (``[batch, n]``), in that order; length ``n``
        (a batch packing each row's valid entries to the front; :mod:`leap.core.decoding.batch`)."""
        if self._keys is None:
            return
        b, n = index.shape
        full = index.view(b, 1, n, 1).expand(b, self._keys.shape[1], n, self._keys.shape[3])
        keys, values = self._keys.gather(2, full), self._values.gather(2, full)
        if self._shared:
            self._reserve(self._keys, self.length)
        self._keys[:, :, :n], self._values[:, :, :n] = keys, values
        self.length = n

    def fork(self, length: int) -> KVLayer:
        """A layer that sees this layer's first ``length`` entries and copies them on its first write."""
        child = KVLayer()
        if self._keys is not None:
            child._keys, child._values, child._shared = self._keys, self._values, True
            child.length = max(0, min(int(length), self.length))
        return child


class LeapKVCache:
    """Per-layer KV caches for leap's layer-wise forward passes (see the module docstring).

    Args:
        num_layers: decoder layers.
        capacity: entries to reserve per layer on first use (the session's prompt + new tokens);
            0 = grow by doubling.
    """

    def __init__(self, num_layers: int, capacity: int = 0) -> None:
        self.layers = [KVLayer(capacity) for _ in range(num_layers)]

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        """What transformers' attention modules call: append and return the layer's keys/values.

        Whatever follows ``layer_idx`` (``cache_kwargs`` positionally up to transformers 5.23, ``kwargs=``
        from 5.24) is not used: leap's cache needs no rotary or sliding-window arguments
        (:func:`leap.core.modeling.layers.check_contract` checks the call)."""
        return self.layers[layer_idx].append(key_states, value_states)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.layers[layer_idx].length

    def begin(self, start: int, q: int, layers: Sequence[int]) -> None:
        """Before a forward of ``q`` tokens at ``start`` through ``layers`` (the layer stack calls it): nothing here;
        a static cache sets its write slots (:mod:`leap.core.modeling.graphs.static_cache`)."""

    def pad_mask(self, mask: torch.Tensor | None, q: int, dtype: torch.dtype) -> torch.Tensor | None:
        """The attention mask as the layers get it: here ``mask`` itself (over the keys this cache holds); a static
        cache pads it to its whole buffer."""
        return mask

    def keep(self, dest: int, sources: Sequence[int]) -> None:
        """:meth:`KVLayer.keep` on every layer."""
        for layer in self.layers:
            layer.keep(dest, sources)

    def select_rows(self, index: torch.Tensor) -> None:
        """:meth:`KVLayer.select_rows` on every layer."""
        for layer in self.layers:
            layer.select_rows(index)

    def gather_slots(self, index: torch.Tensor) -> None:
        """:meth:`KVLayer.gather_slots` on every layer."""
        for layer in self.layers:
            layer.gather_slots(index)

    def fork(self, length: int) -> LeapKVCache:
        """A copy-on-write view of every layer's first ``length`` entries."""
        forked = LeapKVCache(0)
        forked.layers = [layer.fork(length) for layer in self.layers]
        return forked

    def __len__(self) -> int:
        return len(self.layers)


class PromptKV:
    """The target's keys and values of a request's first ``length`` positions, as every layer's cache holds them
    (after the rotary embedding, in transformers' layout): what a drafter with a cache of its own may take instead
    of computing it (:attr:`leap.core.drafters.base.Drafter.takes_prompt_kv`; the low-bit draft's KV handoff,
    issue 35). A view, valid while the session has not written over those positions: take it when handed it."""

    def __init__(self, cache: LeapKVCache, length: int, row: int = 0) -> None:
        self.cache, self.length, self.row = cache, int(length), int(row)

    @property
    def num_layers(self) -> int:
        return len(self.cache.layers)

    @property
    def device(self) -> torch.device:
        keys = self.cache.layers[0].keys
        return torch.device("cpu") if keys is None else keys.device

    def layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``i``'s keys and values ``[kv_heads, length, head_dim]``."""
        kv = self.cache.layers[i]
        if kv.keys is None or kv.length < self.length:
            raise ValueError(f"layer {i} holds {kv.length} positions, fewer than the prompt's {self.length}")
        return kv.keys[self.row, :, : self.length], kv.values[self.row, :, : self.length]


def _has_enable_gqa() -> bool:
    import inspect

    try:
        return "enable_gqa" in inspect.signature(torch.nn.functional.scaled_dot_product_attention).parameters
    except (TypeError, ValueError):  # builtins without a signature: try it
        try:
            q = torch.zeros(1, 2, 1, 4)
            kv = torch.zeros(1, 1, 1, 4)
            torch.nn.functional.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
            return True
        except (TypeError, RuntimeError):
            return False


_ENABLE_GQA = _has_enable_gqa()


def leap_sdpa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers attention interface: GQA without expanding keys/values for leap's own calls."""
    layerwise = kwargs.pop("leap_layerwise", False)
    window_mask = kwargs.pop("leap_window_mask", None)
    if layerwise and kwargs.get("sliding_window") and window_mask is not None:
        attention_mask = window_mask  # a sliding-window layer: the causal mask with the window applied
    if not layerwise or not _ENABLE_GQA or dropout:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    if attention_mask is not None:
        attention_mask = attention_mask[:, :, :, : key.shape[2]]
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, scale=scaling, enable_gqa=query.shape[1] != key.shape[1]
    )
    return out.transpose(1, 2).contiguous(), None


def install_attention(hf_model: torch.nn.Module) -> bool:
    """Switch an SDPA model to ``"leap_sdpa"`` (same results for every other caller). Returns whether it did."""
    config = getattr(hf_model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) not in {"sdpa", ATTENTION_NAME}:
        return False
    if not register_attention(ATTENTION_NAME, leap_sdpa_attention):  # an older transformers: keep its attention
        return False
    for sub in hf_model.modules():  # every (sub)config the attention modules read
        sub_config = getattr(sub, "config", None)
        if sub_config is not None and getattr(sub_config, "_attn_implementation", None) == "sdpa":
            sub_config._attn_implementation = ATTENTION_NAME
    return True


def eager_attention(device: torch.device | str) -> contextlib.AbstractContextManager:
    """The SDPA kernels an eager forward on ``device`` may use (module docstring): on CUDA every kernel but cuDNN's,
    whose per-shape plan costs more than the step at shapes that change every step; elsewhere, or with
    ``LEAP_CUDNN_ATTENTION=1``, whatever PyTorch picks."""
    if torch.device(device).type != "cuda" or os.environ.get("LEAP_CUDNN_ATTENTION") == "1":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])
