"""leap.core.modeling.direct.llama: a Llama layer called as operators is bitwise the module's own call, is taken only
where that was checked, and never skips a hook."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings, strategies as st

from leap.core import SelfSpecDecoder
from leap.core.config import LayerConfig
from leap.core.modeling.direct import llama as direct
from leap.core.modeling.hf_interface import call_layer
from leap.core.modeling.kv_cache import LeapKVCache
from leap.core.modeling.layers import LayerStack
from tests.tiny import tiny_model

PROMPT = [5, 6, 7, 8, 9, 10, 11]


@pytest.fixture(autouse=True)
def fresh_decisions():
    direct.forget()
    yield
    direct.forget()


def _both_ways(layer, hidden, past, mask, cos, sin):
    """The layer's output and cache entries called through transformers and directly, on equal caches."""
    index = layer.self_attn.layer_idx
    out = []
    for run in ("module", "direct"):
        cache = LeapKVCache(index + 1)
        cache.layers[index].append(*past)
        with torch.inference_mode():
            if run == "module":
                h = call_layer(layer, hidden, cache=cache, attention_mask=mask, position_ids=None,
                               position_embeddings=(cos, sin), leap_layerwise=True)
            else:
                h = direct.llama_layer(layer, hidden, cache, mask, (cos, sin))
        out.append((h, cache.layers[index].keys, cache.layers[index].values))
    return out


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 3), q=st.integers(1, 6), past=st.integers(0, 5), layer=st.integers(0, 5),
       seed=st.integers(0, 2**16), bf16=st.booleans(), masked=st.booleans())
def test_a_direct_call_is_bitwise_the_modules_own(tiny_llama, batch, q, past, layer, seed, bf16, masked):
    """Any batch, step width, cached length, layer, dtype and mask (a random one: trees, batches' holes): output, keys
    and values are bitwise transformers' own call's."""
    dtype = torch.bfloat16 if bf16 else torch.float32
    module = copy.deepcopy(tiny_llama.layers[layer]).to(dtype)  # the shared model's weights stay float32
    g = torch.Generator().manual_seed(seed)
    heads, dim = module.self_attn.config.num_key_value_heads, module.self_attn.head_dim
    rand = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
    mask = None
    if masked or q > 1:
        allowed = torch.rand(batch, 1, q, past + q, generator=g) < 0.7
        allowed[..., past:] &= torch.ones(q, q, dtype=torch.bool).tril()  # causal among the new ones
        allowed[..., past:] |= torch.eye(q, dtype=torch.bool)  # every query sees itself
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    (h1, k1, v1), (h2, k2, v2) = _both_ways(module, rand(batch, q, module.hidden_size),
                                            (rand(batch, heads, past, dim), rand(batch, heads, past, dim)),
                                            mask, rand(batch, q, dim), rand(batch, q, dim))
    assert torch.equal(h1, h2), (h1 - h2).abs().max()
    assert torch.equal(k1, k2) and torch.equal(v1, v2)


def test_leap_takes_llama_layers_and_decodes_with_them_exactly_as_through_transformers(tiny_llama, monkeypatch):
    """The tiny Llama's layers are taken (``model.info['layer_call']``); a prefill and a masked 3-token step give
    bitwise the logits of the transformers path (``LEAP_DIRECT_LAYERS=0``)."""
    assert direct.takes(tiny_llama.layers[0]) and direct.exact_difference(tiny_llama.layers[2]) is None

    def logits(stack):
        with torch.inference_mode():
            cache = stack.new_cache()
            first = stack.logits(stack.run_layers(stack.embed(PROMPT), stack.full_plan, cache, 0))
            step = stack.logits(stack.run_layers(stack.embed([12, 13, 14]), stack.full_plan, cache, len(PROMPT)))
        return first, step

    ours = logits(LayerStack(tiny_llama))
    assert tiny_llama.info["layer_call"] == "direct"
    monkeypatch.setenv("LEAP_DIRECT_LAYERS", "0")
    direct.forget()
    theirs = logits(LayerStack(tiny_llama))
    assert tiny_llama.info["layer_call"] == "transformers" and not direct.takes(tiny_llama.layers[0])
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


def test_other_architectures_and_subclasses_are_called_through_transformers(tiny_qwen2, tiny_mistral, tiny_llama):
    assert not direct.takes(tiny_qwen2.layers[0]) and not direct.takes(tiny_mistral.layers[0])
    layer = tiny_llama.layers[0]
    original = type(layer)
    subclass = type("MyLayer", (original,), {})
    layer.__class__ = subclass  # a researcher's subclass may change forward: never assumed equal
    try:
        assert not direct.takes(layer)
    finally:
        layer.__class__ = original
    direct.forget()
    assert direct.takes(layer)


def test_a_direct_call_that_differs_is_never_used_and_is_said(monkeypatch, capsys):
    """A direct call that does not match the module (planted: off by 1e-3) fails the run-time check: the layers are
    called through transformers, stderr says why once, and decoding is what plain decoding through transformers
    gives."""
    model = tiny_model("llama", layers=4, seed=3)
    monkeypatch.setenv("LEAP_DIRECT_LAYERS", "0")
    reference = SelfSpecDecoder(model, None).generate(PROMPT, max_new_tokens=12).token_ids
    monkeypatch.delenv("LEAP_DIRECT_LAYERS")
    direct.forget()
    exact = direct.llama_layer
    calls = [0]

    def off(*args, **kwargs):
        calls[0] += 1
        return exact(*args, **kwargs) + 1e-3

    monkeypatch.setattr(direct, "llama_layer", off)
    assert not direct.takes(model.layers[0])
    assert "differed from transformers' own call" in capsys.readouterr().err
    checked = calls[0]
    out = SelfSpecDecoder(model, LayerConfig.from_sets(4, skip=[1])).generate(PROMPT, max_new_tokens=12)
    assert out.token_ids == reference and calls[0] == checked  # never called again


def test_hooks_see_every_call(tiny_llama):
    """A forward hook on a layer, or on a module inside one, makes leap call that layer as a module: the hook fires on
    every layer call, and the tokens do not change."""
    plain = SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=10).token_ids
    seen = {"layer": 0, "q_proj": 0}
    hooks = [tiny_llama.layers[2].register_forward_hook(lambda *a: seen.__setitem__("layer", seen["layer"] + 1)),
             tiny_llama.layers[4].self_attn.q_proj.register_forward_hook(
                 lambda *a: seen.__setitem__("q_proj", seen["q_proj"] + 1))]
    try:
        out = SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=10)
    finally:
        for h in hooks:
            h.remove()
    forwards = 1 + len(out.steps)  # the prefill and one forward per step
    assert out.token_ids == plain and seen == {"layer": forwards, "q_proj": forwards}
    assert direct.takes(tiny_llama.layers[2])  # hooks gone: taken again


@pytest.mark.parametrize("pre", [False, True])
def test_global_forward_hooks_see_every_layer_call(tiny_llama, pre):
    """Issue 54: a hook registered for every module (``register_module_forward_hook``: profilers, activation tools)
    must see every decoder layer call (red when only the layer's own hooks are looked at)."""
    from torch.nn.modules import module as torch_module

    plain = SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=8).token_ids
    calls = []
    layers = set(map(id, tiny_llama.layers))

    def hook(module, *args):
        if id(module) in layers:
            calls.append(module)

    register = (torch_module.register_module_forward_pre_hook if pre
                else torch_module.register_module_forward_hook)
    handle = register(hook)
    try:
        out = SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=8)
    finally:
        handle.remove()
    assert out.token_ids == plain
    assert len(calls) == tiny_llama.num_layers * (1 + len(out.steps))  # every layer, the prefill and every step
    assert direct.takes(tiny_llama.layers[0])  # the hook gone: taken again


def test_the_contract_check_names_a_direct_call_that_differs(monkeypatch):
    """Issue 54: ``check_contract`` (``leap doctor``, ``.ci/newest``) compares the direct call with the module's own: a
    transformers release that changes the layer is named (planted: the direct call's eps is off)."""
    from leap.core.modeling.layers import check_contract

    real = direct._rms_norm

    def off(norm, x):
        return real(norm, x) * (1 + 1e-3)

    monkeypatch.setattr(direct, "_rms_norm", off)
    problems = check_contract()
    assert any("direct call of LlamaDecoderLayer differs" in p for p in problems), problems
