"""Per-layer CUDA graphs over a static cache: any layer configuration is a sequence of replays.

On a GPU every kernel launched from Python costs microseconds of host time, and a small decoder layer is a few
dozen kernels: leap's eager step at Llama-3-8B's shape was launch-bound (29.8 ms/token on an H100, against 9.97 for
transformers' compiled ``generate``). A CUDA graph records a layer's kernels once and replays them with one launch.
One graph per (decoder layer, step width) suffices for every configuration LEAP searches: executing a layer is one
replay, skipping it is none, repeating it is two, in any order (issue 51's probe on an H100: 8B plain step 9.41 ms,
a draft of half the layers 0.505 of it). No graph per configuration, no compilation.

How: every graph of width ``q`` reads and writes the same static buffers (:class:`WidthBuffers`): the hidden states
(a layer's graph reads them and writes its output back, so replays chain without copies), the rotary tables, the
additive mask over the whole cache and the cache's write slots
(:class:`~leap.core.modeling.graphs.static_cache.StaticKVCache`, whose buffers are the graphs' keys and values).
Before a forward the inputs are copied into those buffers; after it the host moves each layer's length (a replay
runs no Python). The final norm and the LM head are one graph per
width too. The embedding is one kernel and runs as is.

When: every graph is captured at the first forward over a cache the graphs are bound to (:meth:`LayerGraphs.prepare`:
each layer and the head at every width, 1 to :data:`MAX_WIDTH`), never later inside a request. A capture costs
milliseconds (the default model's 92 graphs took 0.65 s on an H200): captured lazily, each new draft or verification
width cost a request about 0.2 s, inside the call a search times as a trial's reward. The cache's capacity is a power
of two (:func:`capacity_bucket`), so a longer request re-binds (and captures again) only when it outgrows the bucket.

What runs eagerly (and says so once): a layer with a forward hook (hooks are Python), a draft's replacement layers
(low-bit copies), a forward that records per-layer inputs, a sliding-window model, and any cache but the engine's
own (a probe's fork). The first replay of every graph is checked against the same function run eagerly on the same
inputs; a graph that differs is dropped for good, said once, and its layer runs eagerly.

Off a GPU, :class:`Replay` stands in for ``torch.cuda.CUDAGraph`` (it calls the recorded function on the same
static buffers), so everything but the capture itself - the buffers, the copies, the bookkeeping, the checks - is
tested on the CPU. ``LEAP_GRAPHS=0`` (``--graphs off``) is the ablation: the eager layer path.

Who calls what: :class:`leap.core.modeling.layers.LayerStack` with ``engine="graphs"`` (the default on CUDA) builds
one :class:`LayerGraphs` and sends each forward through :meth:`LayerGraphs.run` where :meth:`LayerGraphs.usable`.
"""

from __future__ import annotations

import sys
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from leap.core.modeling.direct.llama import layer_call
from leap.core.modeling.graphs.static_cache import DRAFT_SLACK, StaticKVCache
from leap.core.runtime.notices import say_once

__all__ = ["LayerGraphs", "Replay", "WidthBuffers", "capture", "replay_checked", "bucket", "capacity_bucket",
           "MAX_WIDTH", "WIDTHS"]

_SAID: set[str] = set()

#: the widest forward that replays graphs (verification of chains and of trees up to the calibrated cap); wider ones
#: (a prompt's prefill) run the same layers eagerly over the static cache
MAX_WIDTH = 64


def bucket(q: int) -> int:
    """The captured width a forward of ``q`` tokens is padded to: the next power of two (1, 2, 4, ..., 64), so that a
    model holds a few graphs per layer, not one per width."""
    return 1 << max(int(q) - 1, 0).bit_length()


#: every width a graph is captured at (:func:`bucket`'s values up to :data:`MAX_WIDTH`)
WIDTHS = tuple(1 << i for i in range(MAX_WIDTH.bit_length()))

#: the smallest cache the graphs are bound to
MIN_CAPACITY = 256


def capacity_bucket(slots: int) -> int:
    """The capacity a cache of ``slots`` is given: the next power of two, at least :data:`MIN_CAPACITY`. The graphs
    are bound to the cache's buffers (the mask spans them), so a request longer than the capacity captures every graph
    again: in powers of two that happens a few times in a process, not at every longer prompt. Attention reads the
    whole buffer, masked: at most twice the slots a request needs."""
    return max(MIN_CAPACITY, 1 << max(int(slots) - 1, 0).bit_length())


def _padded_mask(stack: Any, start: int, q: int, width: int, mask: torch.Tensor | None) -> torch.Tensor | None:
    """The mask over ``start + width`` keys for ``q`` real queries padded to ``width``: the real rows' mask (causal,
    or a tree's), and padded rows that see only slot 0 (a row of nothing but -inf would give NaN)."""
    if width == q:
        return mask if mask is not None else stack._mask(start, q)
    real = mask if mask is not None else stack._mask(start, q)
    out = torch.full((1, 1, width, start + width), torch.finfo(stack.dtype).min, dtype=stack.dtype,
                     device=stack.device)
    if real is None:  # one real query: it sees every cached key and itself
        out[..., 0, : start + 1] = 0
    else:
        out[..., :q, : start + q] = real
    out[..., q:, 0] = 0
    return out


class Replay:
    """What stands in for a CUDA graph off a GPU: replaying calls the recorded function (on the same buffers)."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn

    def replay(self) -> None:
        self.fn()


def capture(fn: Callable[[], None], device: torch.device, pool: Any = None) -> Any:
    """``fn`` recorded once: a ``torch.cuda.CUDAGraph`` on CUDA (warmed up on a side stream first, as torch's docs
    ask), else a :class:`Replay`. Nothing runs for real during the capture: call ``replay()`` afterwards."""
    if device.type != "cuda":
        return Replay(fn)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fn()  # warm-up: allocations and lazy initialisation happen outside the capture
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        fn()
    return graph


def replay_checked(owner: Any, key: tuple, forward: Callable[[], torch.Tensor], hidden: torch.Tensor,
                   what: str) -> None:
    """``hidden <- forward()`` as a replay of ``owner``'s graph ``key`` (``owner``: :class:`LayerGraphs` or
    :class:`~leap.core.modeling.graphs.batch.BatchGraphs`, with their ``graphs``, ``checked``, ``broken``,
    ``capture_s``, ``device`` and ``pool``): captured on first use; its first replay checked against ``forward`` run
    eagerly on the same inputs, and a graph that differs (or cannot be captured) is dropped for good, said once as
    ``what``, and ``forward`` runs eagerly from then on."""
    if key in owner.broken:
        hidden.copy_(forward())
        return
    graph = owner.graphs.get(key)
    if graph is None:
        t0, saved = time.perf_counter(), hidden.clone()  # a CUDA capture's warm-up runs the layer once
        try:
            graph = owner.graphs[key] = capture(lambda: hidden.copy_(forward()), owner.device, owner.pool)
        except Exception as err:  # noqa: BLE001 - a layer that cannot be captured runs eagerly, said once
            owner.broken.add(key)
            say_once(f"{what} could not be captured ({type(err).__name__}: {err}); it runs eagerly", _SAID)
            hidden.copy_(saved)
            hidden.copy_(forward())
            return
        hidden.copy_(saved)
        owner.capture_s += time.perf_counter() - t0
    if key in owner.checked:
        graph.replay()
        return
    expected = forward()  # the eager function on the same inputs (it writes the same cache entries)
    graph.replay()
    owner.checked.add(key)
    if not torch.equal(expected, hidden):
        owner.broken.add(key)
        say_once(f"{what}'s replay differed from the same layer run eagerly by "
                 f"{(expected.float() - hidden.float()).abs().max().item():.3g}; that layer runs eagerly "
                 "(please report it: leap/core/modeling/graphs/engine.py)", _SAID)
        hidden.copy_(expected)


@dataclass
class WidthBuffers:
    """The static inputs of every graph of one step width ``q`` (copied into before each forward)."""

    hidden: torch.Tensor  # [1, q, H]: a layer's input, overwritten by its output
    position_ids: torch.Tensor  # [1, q]
    cos: torch.Tensor  # [1, q, D]
    sin: torch.Tensor  # [1, q, D]
    mask: torch.Tensor  # [1, 1, q, capacity]
    logits: torch.Tensor | None = None  # [q, V]: the head graph's output


class LayerGraphs:
    """The graphs of one :class:`~leap.core.modeling.layers.LayerStack` (see the module docstring)."""

    def __init__(self, stack: Any) -> None:
        self.stack = stack
        self.device = stack.device
        self.graphs: dict[tuple, Any] = {}  # (layer index or "head", width) -> graph
        self.checked: set[tuple] = set()  # graphs whose first replay matched the eager function
        self.broken: set[tuple] = set()  # graphs that did not: their layers run eagerly
        self.buffers: dict[int, WidthBuffers] = {}
        self.home: StaticKVCache | None = None  # the cache the graphs are bound to
        self._holder: weakref.ref | None = None  # the session-side owner of ``home`` (alive: home is taken)
        self._generation = -1
        self._hooks: dict[int, tuple] = {}
        self.pool = torch.cuda.graph_pool_handle() if self.device.type == "cuda" else None
        self.capture_s = 0.0
        self.prepared = False  # every graph captured over the bound cache (prepare)

    # ------------------------------------------------------------------ the cache the graphs are bound to
    def new_cache(self, capacity: int) -> StaticKVCache:
        """The engine's own cache when it is free (the graphs are bound to its buffers), emptied and grown to
        ``capacity`` if needed; a cache of its own (run eagerly) while an earlier one is still held."""
        capacity = capacity_bucket(int(capacity) + DRAFT_SLACK)
        if self._holder is not None and self._holder() is not None:
            say_once("leap: graphs: a second cache was asked for while the first is in use; the second runs "
                     "eagerly", _SAID)
            return StaticKVCache(self.stack.num_layers, capacity, self.device)
        if self.home is None or self.home.capacity < capacity:
            self.home = StaticKVCache(self.stack.num_layers, capacity, self.device)
            self._reset()
        for layer in self.home.layers:
            layer.length = 0
        handle = _Handle(self.home)
        self._holder = weakref.ref(handle)
        return handle

    def _reset(self) -> None:
        self.graphs.clear()
        self.buffers.clear()
        self.checked.clear()
        self.prepared = False
        self._generation = self.home.generation if self.home is not None else -1

    # ------------------------------------------------------------------ which forwards replay
    def usable(self, cache: Any, q: int, plan: Sequence[tuple[int, int]], record: Any, replace: Any,
               window: Any) -> bool:
        """Whether this forward replays graphs: the engine's own cache, at most :data:`MAX_WIDTH` tokens (a prompt's
        prefill runs eagerly), no recorded inputs, no replaced layers, no sliding window, no hook on any layer it
        runs."""
        target = cache.target if isinstance(cache, _Handle) else None
        if target is None or target is not self.home or q > MAX_WIDTH or record is not None or replace or window:
            return False
        return not any(self._hooked(index) for index, _ in plan)

    def _hooked(self, index: int) -> bool:
        from leap.core.modeling.direct.llama import _hooked

        modules = self._hooks.get(index)
        if modules is None:
            modules = self._hooks[index] = tuple(self.stack.model.layers[index].modules())
        return _hooked(modules)

    # ------------------------------------------------------------------ a forward
    def run(self, hidden: torch.Tensor, plan: Sequence[tuple[int, int]], cache: Any, start: int,
            positions: Sequence[int] | None, mask: torch.Tensor | None) -> torch.Tensor:
        """:meth:`~leap.core.modeling.layers.LayerStack.run_layers` by replays (see the module docstring). The ``q``
        tokens are padded to the width's bucket (:func:`bucket`): padded rows write slots past the real ones (stale
        for every later query, which the mask hides) and their outputs are dropped."""
        home, stack = cache.target, self.stack
        q = hidden.shape[1]
        width = bucket(q)
        home.begin(start, width, [index for index, _ in plan])
        if home.generation != self._generation or (width in self.buffers
                                                    and self.buffers[width].mask.shape[-1] != home.capacity):
            self._reset()  # buffers reallocated (grown): the graphs read the old ones
        if not self.prepared:
            self.prepare(hidden)
            home.begin(start, width, [index for index, _ in plan])
        bufs = self._buffers(width, hidden)
        padded = torch.cat([hidden, hidden.new_zeros(1, width - q, hidden.shape[-1])], 1) if width > q else hidden
        if positions is not None and width > q:
            top = max(int(p) for p in positions)
            positions = [*positions, *range(top + 1, top + 1 + width - q)]
        self._fill(bufs, home, start, padded, positions, _padded_mask(stack, start, q, width, mask))
        for index, passes in plan:
            for _ in range(passes):
                self._layer(index, width, bufs, home)
                home.layers[index].advance(start, q)
        return bufs.hidden[:, :q].clone()  # the next forward writes the buffer: a caller may keep this one

    def prepare(self, like: torch.Tensor) -> None:
        """Capture every graph now - each layer without a hook and the head, at every width of :data:`WIDTHS` - and
        check each one's first replay against the same function run eagerly, so that no later forward over this cache
        captures (:meth:`run` calls it at the first forward after the graphs are bound). The inputs are random (a
        seeded generator of its own: the caller's random state is not touched) and are written above every entry the
        cache holds, where the mask hides them until a real forward overwrites them; with no room there for the widest
        width, the graphs are captured at their first use instead."""
        home, stack = self.home, self.stack
        self.prepared = True
        start = max((layer.length for layer in home.layers), default=0)
        if start + MAX_WIDTH > home.capacity:
            return
        generator = torch.Generator(device=self.device).manual_seed(0)
        for width in WIDTHS:
            home.begin(start, width, [])
            bufs = self._buffers(width, like)
            hidden = torch.randn(bufs.hidden.shape, generator=generator, device=self.device).to(bufs.hidden.dtype)
            self._fill(bufs, home, start, hidden, None, stack._mask(start, width))
            for index in range(stack.num_layers):
                if not self._hooked(index):
                    bufs.hidden.copy_(hidden)  # each layer's own random input: no chain through layers to overflow
                    self._layer(index, width, bufs, home)
            self.logits(hidden)

    def _fill(self, bufs: WidthBuffers, home: StaticKVCache, start: int, hidden: torch.Tensor,
              positions: Sequence[int] | None, mask: torch.Tensor | None) -> None:
        """Copy a forward's inputs (``hidden`` padded to the width) into the width's static buffers."""
        position_ids, (cos, sin) = self.stack._positions(start, hidden.shape[1], hidden, positions)
        bufs.hidden.copy_(hidden)
        bufs.position_ids.copy_(position_ids)
        bufs.cos.copy_(cos)
        bufs.sin.copy_(sin)
        bufs.mask.copy_(home.pad_mask(mask, hidden.shape[1], self.stack.dtype))

    def _buffers(self, q: int, like: torch.Tensor) -> WidthBuffers:
        bufs = self.buffers.get(q)
        if bufs is None:
            head_dim = self.stack.model.rotary_emb(like[:, :1], position_ids=torch.zeros(
                1, 1, dtype=torch.long, device=self.device))[0].shape[-1]
            bufs = self.buffers[q] = WidthBuffers(
                hidden=like.new_zeros(1, q, like.shape[-1]),
                position_ids=torch.zeros(1, q, dtype=torch.long, device=self.device),
                cos=like.new_zeros(1, q, head_dim), sin=like.new_zeros(1, q, head_dim),
                mask=like.new_zeros(1, 1, q, self.home.capacity))
        return bufs

    def _layer(self, index: int, q: int, bufs: WidthBuffers, home: StaticKVCache) -> None:
        """Layer ``index`` over the width's buffers: a replay, captured on first use and checked on its first replay
        against the same function run eagerly; a layer whose graph failed that check runs eagerly."""
        layer = self.stack.model.layers[index]

        def forward() -> torch.Tensor:
            return layer_call(layer, bufs.hidden, cache=home, attention_mask=bufs.mask,
                              position_ids=bufs.position_ids, position_embeddings=(bufs.cos, bufs.sin))

        replay_checked(self, (index, q), forward, bufs.hidden, f"leap: graphs: layer {index}")

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The final norm and the LM head over ``[1, q, H]`` -> ``[q, V]`` float32, one replay per width's bucket."""
        stack, q = self.stack, hidden.shape[1]
        width = bucket(q)
        key = ("head", width)
        if key in self.broken or width > MAX_WIDTH or self.home is None:  # no cache yet: no buffers to bind to
            return stack.eager_logits(hidden)
        bufs = self._buffers(width, hidden)
        bufs.hidden[:, :q].copy_(hidden)
        graph = self.graphs.get(key)
        if graph is None:
            bufs.logits = stack.eager_logits(bufs.hidden)
            t0 = time.perf_counter()
            try:
                graph = self.graphs[key] = capture(lambda: bufs.logits.copy_(stack.eager_logits(bufs.hidden)),
                                                   self.device, self.pool)
            except Exception as err:  # noqa: BLE001 - as a layer's
                self.broken.add(key)
                say_once(f"leap: graphs: the LM head could not be captured ({type(err).__name__}: {err}); it runs "
                         "eagerly", _SAID)
                return stack.eager_logits(hidden)
            self.capture_s += time.perf_counter() - t0
        expected = None if key in self.checked else stack.eager_logits(bufs.hidden)
        graph.replay()
        if expected is not None:
            self.checked.add(key)
            if not torch.equal(expected, bufs.logits):
                self.broken.add(key)
                say_once("leap: graphs: the LM head's replay differed from the eager head; it runs eagerly", _SAID)
                return expected[:q]
        return bufs.logits[:q].clone()

    def describe(self) -> str:
        return f"{len(self.graphs)} graphs captured in {self.capture_s:.2f} s" + (
            f", {len(self.broken)} failed their check" if self.broken else "")


class _Handle(StaticKVCache):
    """A session's view of the engine's cache: the same layers and buffers (what the graphs are bound to), held by one
    session at a time (:meth:`LayerGraphs.new_cache`)."""

    def __init__(self, target: StaticKVCache) -> None:  # noqa: D107 - shares the target's state, never copies it
        self.__dict__ = target.__dict__
        self.target = target

    def fork(self, length: int) -> StaticKVCache:
        return self.target.fork(length)


def announce(graphs: LayerGraphs, model_name: str) -> None:
    """Say once per model what capturing cost (the first forward over a cache captures every graph)."""
    print(f"leap: graphs for {model_name}: {graphs.describe()}", file=sys.stderr, flush=True)
