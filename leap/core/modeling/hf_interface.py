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
  accepts anything after them (:func:`check_contract` tells when that stops being enough);
* **the attention and mask registries** (:func:`register_attention`), transformers' own SDPA wrapper
  (:func:`sdpa_attention_forward`), the architecture's ``apply_rotary_pos_emb`` (:func:`rotary_function`);
* **a model output's cache** (:func:`output_cache`: ``past_key_values`` up to 5.23, ``cache`` from 5.24)
  and the cache class transformers' own forward fills (:func:`dynamic_cache`).

Who calls what: :mod:`leap.core.modeling.layers` (decoder layers), :mod:`leap.heads.head` (the EAGLE
head's decoder layer), :mod:`leap.core.modeling.kv_cache` (attention registration),
:mod:`leap.core.modeling.model` (rotary function for metrics), :mod:`leap.core.modeling.low_bit`
(the int8 runner's cache), ``leap doctor`` and ``tests/core/modeling/test_hf_interface.py``
(:func:`check_contract`: what leap expects, checked on a two-layer model in memory, each broken
expectation named with the installed version).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any

import torch

__all__ = [
    "TESTED_RANGE", "transformers_version", "cache_keyword", "call_layer", "output_cache", "dynamic_cache",
    "register_attention", "sdpa_attention_forward", "rotary_function", "check_contract",
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

    from leap.core.modeling.kv_cache import ATTENTION_NAME, LeapKVCache, leap_sdpa_attention

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
    from leap.core.modeling.layers import LayerStack
    from leap.core.modeling.model import wrap_model

    leap_model = wrap_model(model, None, name="contract")
    stack = LayerStack(leap_model)
    with torch.no_grad():
        ours = stack.logits(stack.run_layers(stack.embed(ids[0]), stack.full_plan, stack.new_cache(), 0))
        theirs = model(input_ids=ids).logits[0].float()
    if not torch.allclose(ours, theirs, atol=1e-4, rtol=1e-4):
        problem(f"leap's layer-by-layer forward differs from the model's own forward by "
                f"{(ours - theirs).abs().max().item():.3g} in the logits")
    return problems
