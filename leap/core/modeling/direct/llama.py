"""transformers' Llama decoder layer, called directly (issue 35: the verifier toward its floor).

A float32 step of the default model (SmolLM2-135M, 30 Llama layers) spends about as long outside its matrix products
as in them (``docs/data/step_profile.json``): per layer some 20 small operators, and around them the module calls,
keyword handling, deprecation wrappers and attention-interface lookup of ``LlamaDecoderLayer.forward``. This module
runs the same operators in the same order - RMSNorm, the q/k/v projections, transformers' own
``apply_rotary_pos_emb``, leap's cache and attention (:mod:`leap.core.modeling.kv_cache`), the output projection, the
residuals and the SiLU MLP - without the modules around them. The products, the weights and the arithmetic are the
module's; only Python is left out, so the result is bitwise the module's own (measured:
``python experiments/2026-11-26-direct-layers/direct_layers.py``, experiments/2026-11-26-engine-notebook).

Exact, checked at run time, never assumed: the first time a kind of layer (class, dtype, device) comes here, one of
its layers runs both ways on the same random inputs - a 4-token step with a causal mask over 3 cached positions, and
a 1-token step - and its output and cache entries must be bitwise equal (``torch.equal``); otherwise leap calls that
kind of layer through transformers and says so once on stderr. ``LEAP_DIRECT_LAYERS=0`` (read when a layer is first
seen) is the ablation.

Taken: exactly transformers' ``LlamaDecoderLayer`` with its own attention, MLP and norm classes (type identity: a
subclass may change ``forward``), SiLU, leap's attention (``leap_sdpa``), in eval mode, with leap's own
:class:`~leap.core.modeling.kv_cache.LeapKVCache` and no sliding-window mask. Anything else - other architectures,
the low-bit layer copies, the EAGLE head, transformers' own caches - goes to
:func:`leap.core.modeling.hf_interface.call_layer` unchanged. Linears that are not ``nn.Linear`` (leap's packed
oneDNN linears, :mod:`leap.core.modeling.fast_linear`) are called as modules.

Like :mod:`leap.core.modeling.hf_interface`, this module knows transformers' internals (the Llama layer's structure);
``check_contract`` (``leap doctor``, ``.ci/newest``) compares it with the module on every transformers release CI
sees.

Who calls what: :meth:`leap.core.modeling.layers.LayerStack.run_layers` and
:class:`leap.core.decoding.batch_state.BatchState` call :func:`layer_call` for every decoder layer;
:func:`takes` says whether a layer is run here (``model.info["layer_call"]``).
"""

from __future__ import annotations

import functools
import os
import weakref

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as torch_module

from leap.core.modeling.hf_interface import call_layer
from leap.core.modeling.kv_cache import ATTENTION_NAME, LeapKVCache, leap_sdpa_attention
from leap.core.runtime.notices import say_once

__all__ = ["layer_call", "takes", "llama_layer", "exact_difference", "forget"]

# layer -> its modules (whose hooks are checked on every call) where it is run here, else None; once per layer
_TAKES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# (layer class, dtype, device) -> whether the direct call matched transformers' own, bitwise
_EXACT: dict[tuple, bool] = {}
_SAID: set[str] = set()


def forget() -> None:
    """Forget every decision (tests; after changing ``LEAP_DIRECT_LAYERS``)."""
    _TAKES.clear()
    _EXACT.clear()


def _linear(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, module.weight, module.bias) if type(module) is nn.Linear else module(x)


def _rms_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``LlamaRMSNorm.forward``."""
    dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + norm.variance_epsilon)
    return norm.weight * h.to(dtype)


@functools.cache
def _rotary():
    """transformers' ``apply_rotary_pos_emb`` for Llama (imported on first use, as transformers' Llama is)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    return apply_rotary_pos_emb


def llama_layer(layer: nn.Module, hidden: torch.Tensor, cache: LeapKVCache, attention_mask: torch.Tensor | None,
                position_embeddings: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``LlamaDecoderLayer.forward`` with leap's cache and attention, as operators: ``hidden`` ``[B, q, H]`` ->
    ``[B, q, H]``; appends the layer's ``q`` keys and values to ``cache``."""
    attn, mlp = layer.self_attn, layer.mlp
    b, q = hidden.shape[0], hidden.shape[1]
    shape = (b, q, -1, attn.head_dim)
    x = _rms_norm(layer.input_layernorm, hidden)
    query = _linear(attn.q_proj, x).view(shape).transpose(1, 2)
    key = _linear(attn.k_proj, x).view(shape).transpose(1, 2)
    value = _linear(attn.v_proj, x).view(shape).transpose(1, 2)
    cos, sin = position_embeddings
    query, key = _rotary()(query, key, cos, sin)
    key, value = cache.layers[attn.layer_idx].append(key, value)
    out, _ = leap_sdpa_attention(attn, query, key, value, attention_mask, scaling=attn.scaling, leap_layerwise=True)
    out = out.reshape(b, q, -1).contiguous()
    hidden = hidden + _linear(attn.o_proj, out)
    x = _rms_norm(layer.post_attention_layernorm, hidden)
    return hidden + _linear(mlp.down_proj, F.silu(_linear(mlp.gate_proj, x)) * _linear(mlp.up_proj, x))


def _is_llama(layer: nn.Module) -> bool:
    try:
        from transformers.activations import ACT2FN
        from transformers.models.llama import modeling_llama as ml
    except ImportError:  # pragma: no cover - transformers without Llama
        return False
    attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
    return (type(layer) is ml.LlamaDecoderLayer and type(attn) is ml.LlamaAttention and type(mlp) is ml.LlamaMLP
            and type(layer.input_layernorm) is ml.LlamaRMSNorm and type(layer.post_attention_layernorm) is ml.LlamaRMSNorm
            and type(mlp.act_fn) is type(ACT2FN["silu"]) and not mlp.config.mlp_bias
            and getattr(attn.config, "_attn_implementation", None) == ATTENTION_NAME
            and not getattr(attn, "sliding_window", None))


def exact_difference(layer: nn.Module, seed: int = 0) -> float | None:
    """Run ``layer`` both ways on the same random inputs (a 4-token step over 3 cached positions with a causal mask,
    then a 1-token step); ``None`` when outputs and cache entries are bitwise equal, else the largest difference."""
    param = next(layer.parameters())
    dtype, device = param.dtype, param.device
    attn = layer.self_attn
    index, heads, dim = attn.layer_idx, attn.config.num_key_value_heads, attn.head_dim
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=g).to(device=device, dtype=dtype)  # noqa: E731
    past_k, past_v = rand(1, heads, 3, dim), rand(1, heads, 3, dim)
    caches = [LeapKVCache(index + 1) for _ in range(2)]
    for cache in caches:
        cache.layers[index].append(past_k, past_v)
    worst = 0.0
    for q in (4, 1):
        hidden, cos, sin = rand(1, q, layer.hidden_size), rand(1, q, dim), rand(1, q, dim)
        start = caches[0].layers[index].length
        mask = None
        if q > 1:
            keys = torch.arange(start + q, device=device).view(1, -1)
            queries = torch.arange(start, start + q, device=device).view(-1, 1)
            mask = torch.zeros(q, start + q, dtype=dtype, device=device).masked_fill_(
                keys > queries, torch.finfo(dtype).min).view(1, 1, q, start + q)
        with torch.inference_mode():
            theirs = call_layer(layer, hidden, cache=caches[0], attention_mask=mask,
                                position_ids=torch.arange(start, start + q, device=device).view(1, -1),
                                position_embeddings=(cos, sin), leap_layerwise=True)
            ours = llama_layer(layer, hidden, caches[1], mask, (cos, sin))
        pairs = [(theirs, ours), (caches[0].layers[index].keys, caches[1].layers[index].keys),
                 (caches[0].layers[index].values, caches[1].layers[index].values)]
        for a, b in pairs:
            if a.shape != b.shape:
                return float("inf")
            if not torch.equal(a, b):
                worst = max(worst, (a.float() - b.float()).abs().max().item())
    return worst or None


def _decide(layer: nn.Module) -> bool:
    if os.environ.get("LEAP_DIRECT_LAYERS", "1") == "0" or not _is_llama(layer):
        return False
    param = next(layer.parameters(), None)
    if param is None:
        return False
    kind = (type(layer), param.dtype, param.device.type)
    if kind not in _EXACT:
        difference = exact_difference(layer)
        _EXACT[kind] = difference is None
        if difference is not None:
            say_once(f"leap: calling {type(layer).__name__} directly ({param.dtype}, {param.device.type}) differed "
                     f"from transformers' own call by {difference:.3g}; leap calls it through transformers (slower). "
                     "Please report it with your transformers version (leap/core/modeling/direct/llama.py)", _SAID)
    return _EXACT[kind]


def _modules(layer: nn.Module) -> tuple[nn.Module, ...] | None:
    """The modules whose hooks a direct call would skip (``None``: not taken here)."""
    return tuple(layer.modules()) if _decide(layer) else None


def _hooked(modules: tuple[nn.Module, ...]) -> bool:
    """Whether any forward hook is registered on these modules or globally: a direct call would skip it, so such a
    layer is called as a module (a hook that counts calls or reads activations sees every call)."""
    if torch_module._global_forward_hooks or torch_module._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def takes(layer: nn.Module) -> bool:
    """Whether :func:`layer_call` runs ``layer`` here (given leap's cache and no window mask): decided once per
    layer, except that a layer with forward hooks (on it or on any module inside it) is called as a module."""
    try:
        modules = _TAKES[layer]
    except KeyError:
        modules = _TAKES[layer] = _modules(layer)
    return modules is not None and not _hooked(modules)


def layer_call(layer: nn.Module, hidden: torch.Tensor, *, cache, attention_mask, position_ids, position_embeddings,
               leap_window_mask: torch.Tensor | None = None) -> torch.Tensor:
    """One decoder layer of leap's layer-wise forward: :func:`llama_layer` where it is taken, else transformers'
    call (:func:`~leap.core.modeling.hf_interface.call_layer` with leap's attention keywords)."""
    if leap_window_mask is None and isinstance(cache, LeapKVCache) and not layer.training and takes(layer):
        return llama_layer(layer, hidden, cache, attention_mask, position_embeddings)
    return call_layer(layer, hidden, cache=cache, attention_mask=attention_mask, position_ids=position_ids,
                      position_embeddings=position_embeddings, leap_layerwise=True, leap_window_mask=leap_window_mask)
