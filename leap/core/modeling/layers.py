"""Running a decoder layer by layer, with per-layer KV caches that can be rolled back.

:class:`LayerStack` runs transformers' modules: the decoder layers, rotary
embeddings are transformers' own, called exactly as ``LlamaModel.forward`` calls them (through
:mod:`leap.core.modeling.hf_interface`, the one module that knows transformers' internals), but one layer at
a time so that a draft can skip or repeat layers. The KV cache is leap's :class:`~leap.core.modeling.kv_cache.LeapKVCache`
(buffers written in place, rollback by length; why: :mod:`leap.core.modeling.kv_cache`).

Cache layout (the invariant the decoder keeps): between decoding steps every layer's cache holds the
keys/values of all committed tokens except the last one, which is *pending* (it has been chosen but
not yet fed through the model). During a draft, executed layers append entries for draft positions
and skipped layers append none, so layers hold caches of different lengths; :meth:`rollback` crops
each layer back to a given length. Nothing is ever cloned: a crop only moves the layer's length.

REPEAT (second pass of a layer on the same position): :meth:`run_layers` crops the first pass's new
entries and lets the second pass append its own, so the repeated layer's cache holds the second pass's
keys/values for the draft position. All draft entries are rolled back before verification.

Who calls what: :class:`leap.core.decoding.decoder.DecodingSession` calls :meth:`embed`, :meth:`run_layers`,
:meth:`logits` and :meth:`rollback`; redundancy metrics (``leap.redundancy``) read per-layer hidden
states through :meth:`run_layers`'s ``record`` argument.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence

import torch

from leap.core.runtime.device import StepClock, wall_clock
from leap.core.modeling.hf_interface import (TESTED_RANGE, cache_keyword, call_layer, register_attention,
                                             transformers_version)
from leap.core.modeling.direct.llama import exact_difference, layer_call, takes
from leap.core.modeling.kv_cache import ATTENTION_NAME, LeapKVCache, eager_attention, leap_sdpa_attention
from leap.core.modeling.graphs.engine import LayerGraphs
from leap.core.modeling.graphs.static_cache import DRAFT_SLACK, StaticKVCache
from leap.core.modeling.model import LeapModel

__all__ = ["LayerStack", "LayerPlan", "plan_for", "causal_mask", "check_contract", "ENGINES", "default_engine"]

#: how :meth:`LayerStack.run_layers` runs: ``eager`` (leap's growing cache, attention over the entries held),
#: ``static`` (a static position-indexed cache, attention over its whole buffer) and ``graphs`` (the static cache,
#: each layer a CUDA graph replayed): :mod:`leap.core.modeling.graphs`
ENGINES = ("eager", "static", "graphs")


def default_engine(device: torch.device | str) -> str:
    """``graphs`` on CUDA, ``eager`` elsewhere; ``LEAP_GRAPHS=0`` (``--graphs off``) keeps CUDA eager too."""
    if os.environ.get("LEAP_GRAPHS", "1") == "0":
        return "eager"
    return "graphs" if torch.device(device).type == "cuda" else "eager"

# (layer index, passes) pairs in execution order; passes is 1 (execute) or 2 (repeat).
LayerPlan = tuple[tuple[int, int], ...]


def plan_for(actions: Sequence[int], start: int = 0, stop: int | None = None) -> LayerPlan:
    """The plan that runs layers ``start..stop-1`` with the given number of passes each (0 = skip)."""
    stop = len(actions) if stop is None else stop
    return tuple((i, actions[i]) for i in range(start, stop) if actions[i] > 0)


def causal_mask(past: int, length: int, dtype: torch.dtype, device) -> torch.Tensor | None:
    """Additive causal mask ``[1, 1, length, past + length]`` for ``length`` queries after ``past`` cached
    keys (None for one query)."""
    if length == 1:
        return None
    q = torch.arange(length, device=device).view(-1, 1) + past
    k = torch.arange(past + length, device=device).view(1, -1)
    mask = torch.zeros(length, past + length, dtype=dtype, device=device)
    return mask.masked_fill_(k > q, torch.finfo(dtype).min).view(1, 1, length, past + length)


class LayerStack:
    """Layer-wise forward passes over a :class:`LeapModel`.
    """

    def __init__(self, model: LeapModel, engine: str | None = None) -> None:
        engine = default_engine(model.device) if engine is None else engine
        if engine not in ENGINES:
            raise ValueError(f"unknown layer engine {engine!r}; choose one of {', '.join(ENGINES)}")
        self.model = model
        self.engine = engine  #: one of :data:`ENGINES`
        self.num_layers = model.num_layers
        self.device = model.device
        self.dtype = model.dtype
        config = model.config
        window = getattr(config, "sliding_window", None)
        # a sliding window only where the config turns it on (Qwen2: use_sliding_window; Mistral: always)
        self.window = int(window) if window and getattr(config, "use_sliding_window", True) else None
        self.step_clock = StepClock(self.device)  # marks within a step, one synchronisation per step
        self._neg_inf = torch.finfo(self.dtype).min
        if self.num_layers:  # how its layers are called (leap.core.modeling.direct): checked once per kind of layer
            model.info["layer_call"] = "direct" if takes(model.layers[0]) else "transformers"
        model.info["engine"] = engine
        self.graphs = LayerGraphs(self) if engine == "graphs" else None

    # ------------------------------------------------------------------ timing
    def clock(self) -> float:
        """Host clock after the device's queued work (:func:`leap.core.runtime.device.wall_clock`): for timing
        whole calls (probes, search overhead), not the phases inside a step."""
        return wall_clock(self.device)

    # ------------------------------------------------------------------ cache
    def new_cache(self, capacity: int = 0) -> LeapKVCache:
        """An empty cache; ``capacity`` entries per layer are reserved on first use (0: grow as needed). With the
        ``static`` engine, a :class:`~leap.core.modeling.graphs.static_cache.StaticKVCache` of ``capacity`` slots
        plus the widest draft's."""
        if self.graphs is not None:
            return self.graphs.new_cache(capacity or 256)
        if self.engine == "static":
            return StaticKVCache(self.num_layers, (capacity or 256) + DRAFT_SLACK, self.device)
        return LeapKVCache(self.num_layers, capacity)

    @staticmethod
    def cache_length(cache, layer: int) -> int:
        return cache.layers[layer].get_seq_length()

    def rollback(self, cache, length: int, layers: Sequence[int] | range | None = None) -> None:
        """Crop the cache of each layer in ``layers`` (default: all) to ``length`` entries."""
        for i in range(self.num_layers) if layers is None else layers:
            extra = cache.layers[i].get_seq_length() - length
            if extra > 0:
                cache.layers[i].crop(-extra)

    @staticmethod
    def keep(cache, dest: int, sources: Sequence[int]) -> None:
        """Move every layer's entries at ``sources`` to ``dest..`` (a draft tree's accepted path)."""
        cache.keep(dest, sources)

    # ------------------------------------------------------------------ forward pieces
    def embed(self, token_ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(token_ids, dtype=torch.long, device=self.device).view(1, -1)
        return self.model.embed_tokens(ids)

    def _positions(self, start: int, length: int, hidden: torch.Tensor, positions: Sequence[int] | None = None):
        if positions is None:
            position_ids = torch.arange(start, start + length, device=self.device).view(1, -1)
        else:
            position_ids = torch.as_tensor(list(positions), dtype=torch.long, device=self.device).view(1, -1)
        return position_ids, self.model.rotary_emb(hidden, position_ids=position_ids)

    def _mask(self, past: int, length: int) -> torch.Tensor | None:
        return causal_mask(past, length, self.dtype, self.device)

    def _window_mask(self, start: int, q: int, positions: Sequence[int] | None, mask: torch.Tensor | None):
        """The attention mask of sliding-window layers: ``mask`` (causal or a tree's) plus "a query at
        position p sees keys at positions > p - window" (transformers' convention). Keys ``0..start-1``
        hold positions ``0..start-1`` (the cache invariant); the ``q`` new keys hold the queries' positions.
        None when the model has no window or no key is out of it."""
        window = self.window
        if not window or start + q <= window:
            return None
        q_pos = torch.arange(start, start + q, device=self.device) if positions is None else \
            torch.as_tensor(list(positions), dtype=torch.long, device=self.device)
        k_pos = torch.cat([torch.arange(start, device=self.device), q_pos])
        outside = (q_pos.view(-1, 1) - k_pos.view(1, -1)) >= window
        base = mask if mask is not None else self._mask(start, q)
        if base is None:
            base = torch.zeros(1, 1, q, start + q, dtype=self.dtype, device=self.device)
        return base.masked_fill(outside.view(1, 1, q, -1), self._neg_inf)

    def run_layers(
        self,
        hidden: torch.Tensor,
        plan: LayerPlan,
        cache,
        start: int,
        *,
        record: dict[int, torch.Tensor] | None = None,
        positions: Sequence[int] | None = None,
        mask: torch.Tensor | None = None,
        replace: Mapping[int, torch.nn.Module] | None = None,
    ) -> torch.Tensor:
        """Run ``hidden`` (positions ``start..start+q-1``) through the layers of ``plan``.

        Args:
            hidden: ``[1, q, hidden]`` input of the first layer in the plan.
            plan: (layer, passes) pairs; each layer appends ``q`` entries to its own cache.
            cache: a :class:`~leap.core.modeling.kv_cache.LeapKVCache` whose layer ``i`` must hold exactly ``start`` entries when
                layer ``i`` runs.
            record: if given, ``record[i]`` receives the input of layer ``i`` for each planned layer.
            positions, mask: a draft tree's positions and attention mask
                (:class:`~leap.core.trees.draft_tree.DraftTree`); default: ``start..start+q-1``, causal.
            replace: modules run instead of the model's own layers (a draft's low-precision copies,
                :mod:`leap.core.modeling.low_bit_layers`); they write the same per-layer cache.
        """
        q = hidden.shape[1]
        if self.graphs is not None and self.graphs.usable(cache, q, plan, record, replace, self.window):
            return self.graphs.run(hidden, plan, cache, start, positions, mask)
        cache.begin(start, q, [index for index, _ in plan])  # a static cache: this forward's write slots
        position_ids, position_embeddings = self._positions(start, q, hidden, positions)
        window_mask = self._window_mask(start, q, positions, mask)
        if window_mask is not None:
            window_mask = cache.pad_mask(window_mask, q, self.dtype)
        mask = cache.pad_mask(self._mask(start, q) if mask is None else mask, q, self.dtype)
        layers = self.model.layers
        with eager_attention(self.device):  # no cuDNN attention on CUDA: a plan per shape (kv_cache's docstring)
            for index, passes in plan:
                if record is not None:
                    record[index] = hidden
                layer = replace[index] if replace and index in replace else layers[index]
                for p in range(passes):
                    if p:  # REPEAT: the second pass replaces the first pass's cache entries
                        cache.layers[index].crop(-q)
                    hidden = layer_call(  # leap.core.modeling.direct: Llama layers as operators, others transformers'
                        layer,
                        hidden,
                        cache=cache,
                        attention_mask=mask,
                        position_ids=position_ids,
                        position_embeddings=position_embeddings,
                        leap_window_mask=window_mask,  # used by layers that declare a sliding window
                    )
                    cache.layers[index].advance(start, q)
        return hidden

    def logits(self, hidden: torch.Tensor, head: torch.nn.Module | None = None) -> torch.Tensor:
        """Final norm and LM head (or a restricted ``head``) over ``[1, q, hidden]`` -> ``[q, vocab]`` (a replay
        per width with the ``graphs`` engine)."""
        if head is None and self.graphs is not None:
            return self.graphs.logits(hidden)
        return self.eager_logits(hidden, head)

    def eager_logits(self, hidden: torch.Tensor, head: torch.nn.Module | None = None) -> torch.Tensor:
        """:meth:`logits` as its operators run (what a graph of the head records)."""
        normed = self.model.norm(hidden)
        return (head or self.model.lm_head)(normed)[0].float()

    @property
    def full_plan(self) -> LayerPlan:
        return tuple((i, 1) for i in range(self.num_layers))


# ---------------------------------------------------------------------------------------------- contract
def check_contract() -> list[str]:
    """What leap expects of the installed transformers, checked on a two-layer Llama built in memory.

    Returns one line per broken expectation, each naming the installed version, what changed and where
    leap's adapter is (empty: all hold). Checked: the decoder layer takes its cache under the keyword
    :func:`cache_keyword` reads; the attention module writes it through ``update(key, value, layer_idx,
    ...)`` once per call with ``[batch, kv_heads, q, head_dim]`` tensors and uses what ``update`` returns;
    leap's keywords reach the registered attention function; the rotary embedding returns ``(cos, sin)``;
    and leap's layer-by-layer forward gives the model's own logits.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    version = transformers_version()
    where = "leap/core/modeling/hf_interface.py"
    problems: list[str] = []

    def problem(text: str) -> None:
        problems.append(f"transformers {version} (leap is tested on {TESTED_RANGE[0]}-{TESTED_RANGE[1]}): "
                        f"{text}; leap's adapter to transformers is {where}")

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config).eval()
    if not register_attention(ATTENTION_NAME, leap_sdpa_attention):
        problem("transformers.AttentionInterface or masking_utils.AttentionMaskInterface is gone")
        return problems
    seen_kwargs: list[dict] = []

    def recording_attention(*args, **kwargs):
        seen_kwargs.append(dict(kwargs))
        return leap_sdpa_attention(*args, **kwargs)

    probe_name = "leap_contract_probe"
    register_attention(probe_name, recording_attention)

    class RecordingCache(LeapKVCache):
        def __init__(self, n):
            super().__init__(n)
            self.calls: list[tuple] = []

        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            self.calls.append((tuple(key_states.shape), tuple(value_states.shape), layer_idx))
            return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    layer = model.model.layers[1]
    keyword = cache_keyword(layer)
    if keyword not in inspect.signature(type(layer).forward).parameters:
        problem(f"{type(layer).__name__}.forward takes neither 'cache' nor 'past_key_values'")
        return problems
    ids = torch.tensor([[3, 5, 7, 9]])
    q = ids.shape[1]
    position_ids = torch.arange(q).view(1, -1)
    hidden = model.model.embed_tokens(ids)
    try:
        cos_sin = model.model.rotary_emb(hidden, position_ids=position_ids)
    except TypeError as error:
        problem(f"the rotary embedding no longer takes (hidden, position_ids=...): {error}")
        return problems
    if not (isinstance(cos_sin, tuple) and len(cos_sin) == 2):
        problem("the rotary embedding no longer returns (cos, sin)")
        return problems
    mask = torch.full((q, q), torch.finfo(hidden.dtype).min).triu(1).view(1, 1, q, q)
    cache = RecordingCache(config.num_hidden_layers)
    try:
        previous = layer.self_attn.config._attn_implementation
        layer.self_attn.config._attn_implementation = probe_name
        with torch.no_grad():
            call_layer(layer, hidden, cache=cache, attention_mask=mask, position_ids=position_ids,
                       position_embeddings=cos_sin, leap_layerwise=True)
    except TypeError as error:
        problem(f"a decoder layer called with leap's cache under {keyword!r} failed: {error} "
                "(the cache interface attention modules call changed: see Cache.update in cache_utils.py)")
        return problems
    finally:
        layer.self_attn.config._attn_implementation = previous
    heads, head_dim = config.num_key_value_heads, config.hidden_size // config.num_attention_heads
    expected = [((1, heads, q, head_dim), (1, heads, q, head_dim), 1)]
    if cache.calls != expected:
        problem(f"the attention module called cache.update {cache.calls}, leap expects {expected} "
                "(one call per forward, (key, value, layer_idx) first)")
    if cache.layers[1].length != q:
        problem(f"after one forward of {q} tokens the layer's cache holds {cache.layers[1].length}")
    if not seen_kwargs or not seen_kwargs[-1].get("leap_layerwise"):
        problem("leap's keywords (leap_layerwise) no longer reach the attention function")

    # end to end: leap's layer-by-layer forward equals the model's own logits
    from leap.core.modeling.model import wrap_model

    leap_model = wrap_model(model, None, name="contract")
    stack = LayerStack(leap_model)
    with torch.no_grad():
        ours = stack.logits(stack.run_layers(stack.embed(ids[0]), stack.full_plan, stack.new_cache(), 0))
        theirs = model(input_ids=ids).logits[0].float()
    if not torch.allclose(ours, theirs, atol=1e-4, rtol=1e-4):
        problem(f"leap's layer-by-layer forward differs from the model's own forward by "
                f"{(ours - theirs).abs().max().item():.3g} in the logits")
    difference = exact_difference(model.model.layers[1])
    if difference is not None:
        problem(f"leap's direct call of LlamaDecoderLayer differs from the module's own by {difference:.3g} "
                "(leap/core/modeling/direct/llama.py follows LlamaDecoderLayer.forward operator by operator)")
    return problems
