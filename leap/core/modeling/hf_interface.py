"""Everything leap takes from transformers' internals, in one module.

leap runs a decoder one layer at a time (:class:`~leap.core.modeling.layers.LayerStack`), so it calls
transformers below its public ``generate``/``forward`` API. That surface is small and lives here:

* **calling a decoder layer** (:func:`call_layer`): the keyword the layer takes its cache under
  (``past_key_values`` up to 5.23; ``cache`` from 5.24, where ``past_key_values`` is a deprecated
  alias), the mask, positions and rotary embeddings, and leap's own keywords, which transformers passes
  through to the attention function;
* **the cache the attention module writes** (:class:`~leap.core.modeling.kv_cache.LeapKVCache`):
  attention modules call ``cache.update(key, value, layer_idx, ...)`` - with ``cache_kwargs``
  positionally up to 5.23, ``kwargs=`` by keyword from 5.24. leap's cache takes the three it uses and
  accepts anything after them (:func:`~leap.core.modeling.layers.check_contract` tells when that stops
  being enough);
* **the attention and mask registries** (:func:`register_attention`), transformers' own SDPA wrapper
  (:func:`sdpa_attention_forward`), the architecture's ``apply_rotary_pos_emb`` (:func:`rotary_function`);
* **a model output's cache** (:func:`output_cache`: ``past_key_values`` up to 5.23, ``cache`` from 5.24)
  and the cache class transformers' own forward fills (:func:`dynamic_cache`).

Who calls what: :mod:`leap.core.modeling.layers` (decoder layers), :mod:`leap.heads.head` (the EAGLE
head's decoder layer), :mod:`leap.core.modeling.kv_cache` (attention registration),
:mod:`leap.core.modeling.model` (rotary function for metrics), :mod:`leap.core.modeling.low_bit`
(the int8 runner's cache), and :func:`leap.core.modeling.layers.check_contract` (what leap expects of
transformers, checked on a two-layer model in memory, each broken expectation named with the installed
version; ``leap doctor``, ``tests/core/modeling/test_hf_interface.py`` and ``.ci/newest`` run it).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
from typing import Any

import torch

__all__ = [
    "TESTED_RANGE", "transformers_version", "cache_keyword", "call_layer", "output_cache", "dynamic_cache",
    "register_attention", "sdpa_attention_forward", "rotary_function", "architecture_digest",
]

# the transformers releases leap's suite has passed on (pyproject's bound stops below the next minor)
TESTED_RANGE = ("5.23", "5.24")


def transformers_version() -> str:
    import transformers

    return str(transformers.__version__)


@functools.lru_cache(maxsize=None)
def _cache_keyword_of(forward) -> str:
    try:
        params = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    if "cache" in params:
        return "cache"
    return "past_key_values"


def cache_keyword(layer: torch.nn.Module) -> str:
    """The keyword ``layer.forward`` takes its KV cache under: ``"cache"`` (transformers >= 5.24) or
    ``"past_key_values"`` (earlier). Read from the signature, once per layer class."""
    return _cache_keyword_of(type(layer).forward)


def call_layer(layer: torch.nn.Module, hidden: torch.Tensor, *, cache, attention_mask, position_ids,
               position_embeddings, **leap_kwargs: Any) -> torch.Tensor:
    """One decoder layer's forward as ``LlamaModel.forward`` calls it; ``leap_kwargs`` reach the attention
    function. Returns the layer's hidden states (older releases return a tuple: its first element)."""
    out = layer(
        hidden,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=cache is not None,
        position_embeddings=position_embeddings,
        **{cache_keyword(layer): cache},
        **leap_kwargs,
    )
    return out[0] if isinstance(out, tuple) else out


def output_cache(output) -> Any:
    """The cache a model's forward returned (``cache`` from 5.24, ``past_key_values`` before)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values", None)


def dynamic_cache():
    """transformers' ``DynamicCache`` class (the torch-int8 low-bit runner's cache)."""
    from transformers import DynamicCache

    return DynamicCache


def sdpa_attention_forward(*args, **kwargs):
    """transformers' own SDPA attention function (leap's attention hands every call it does not own to it)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward as forward

    return forward(*args, **kwargs)


def register_attention(name: str, function) -> bool:
    """Register ``function`` as attention implementation ``name``, with transformers' SDPA mask. False
    where this transformers has no attention registry (leap then keeps transformers' attention)."""
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:
        return False
    AttentionInterface.register(name, function)
    AttentionMaskInterface.register(name, sdpa_mask)
    return True


def rotary_function(attention: torch.nn.Module):
    """The architecture's own ``apply_rotary_pos_emb`` (from the module that defines ``attention``)."""
    return importlib.import_module(type(attention).__module__).apply_rotary_pos_emb


def architecture_digest(config: Any) -> str:
    """A short hash of what a model *is* (its config's fields), not where its weights were read from: a GGUF's first
    load reads the file and later ones the cached float copy, whose ``_name_or_path`` differs and which has no GGUF
    ``quantization_config`` (the weights were dequantised either way), and a cache keyed by the whole config measured
    the same model twice (calibration, the linears' verdict). Empty for an object without a transformers config."""
    if not hasattr(config, "to_dict"):
        return ""
    fields = {k: v for k, v in config.to_dict().items() if k not in ("_name_or_path", "transformers_version")}
    if (fields.get("quantization_config") or {}).get("quant_method") == "gguf":  # the first load's note of the file
        del fields["quantization_config"]  # it dequantised: the float copy later loads read has no such entry
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]
