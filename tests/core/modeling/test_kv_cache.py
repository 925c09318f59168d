"""leap's KV cache (buffers written in place, rollback by length) and its GQA attention path."""

from __future__ import annotations

import contextlib

import torch
from hypothesis import given
from hypothesis import strategies as st

from leap.core.modeling.kv_cache import ATTENTION_NAME, KVLayer, LeapKVCache, eager_attention
from leap.core.modeling.layers import LayerStack


def _kv(n: int, start: float = 0.0) -> torch.Tensor:
    return (torch.arange(n * 4, dtype=torch.float32) + start).view(1, 1, n, 4)


# A list of operations: ("append", n) or ("crop", m); the reference is a plain tensor list.
ops = st.lists(st.one_of(st.tuples(st.just("append"), st.integers(1, 40)),
                         st.tuples(st.just("crop"), st.integers(-30, 60))), max_size=30)


@given(ops=ops, capacity=st.sampled_from([0, 5, 200]))
def test_layer_matches_a_concatenating_reference(ops, capacity):
    layer, reference = KVLayer(capacity), torch.zeros(1, 1, 0, 4)
    for i, (op, n) in enumerate(ops):
        if op == "append":
            new = _kv(n, start=1000.0 * i)
            keys, values = layer.append(new, -new)
            reference = torch.cat([reference, new], dim=2)
            assert torch.equal(keys, reference) and torch.equal(values, -reference)
        else:
            layer.crop(n)
            keep = reference.shape[2] + n if n < 0 else n
            reference = reference[:, :, : max(0, min(reference.shape[2], keep))]
        assert layer.get_seq_length() == reference.shape[2]
        if layer.is_initialized:
            assert torch.equal(layer.keys, reference)
            assert layer.capacity >= layer.length


def test_capacity_is_reserved_once():
    layer = KVLayer(100)
    layer.append(_kv(3), _kv(3))
    buffer = layer._keys
    for _ in range(90):
        layer.append(_kv(1), _kv(1))
    assert layer._keys is buffer and layer.capacity == 100


def test_fork_copies_on_write_and_never_touches_the_parent():
    cache = LeapKVCache(2, capacity=16)
    for layer in range(2):
        cache.update(_kv(6), -_kv(6), layer)
    before = [layer.keys.clone() for layer in cache.layers]
    fork = cache.fork(4)
    assert [layer.get_seq_length() for layer in fork.layers] == [4, 4]
    keys, _ = fork.update(_kv(3, start=500.0), _kv(3), 0)
    assert torch.equal(keys[:, :, :4], before[0][:, :, :4]) and torch.equal(keys[:, :, 4:], _kv(3, start=500.0))
    assert all(torch.equal(b, layer.keys) for b, layer in zip(before, cache.layers))
    assert cache.get_seq_length(0) == 6 and fork.get_seq_length(1) == 4


def test_tiny_models_use_leap_attention_and_generate_still_matches(tiny_any):
    """The attention switch is invisible to ``model.generate`` (transformers' own SDPA path)."""
    assert tiny_any.config._attn_implementation == ATTENTION_NAME
    ids = torch.tensor([[5, 9, 14, 22, 31]])
    with torch.inference_mode():
        out = tiny_any.hf_model.generate(ids, max_new_tokens=8, do_sample=False)
    tiny_any.config._attn_implementation = "sdpa"
    try:
        with torch.inference_mode():
            ref = tiny_any.hf_model.generate(ids, max_new_tokens=8, do_sample=False)
    finally:
        tiny_any.config._attn_implementation = ATTENTION_NAME
    assert torch.equal(out, ref)


@given(prompt=st.lists(st.integers(0, 96), min_size=2, max_size=30), q=st.integers(1, 9))
def test_layerwise_forward_matches_transformers_forward(tiny_any, prompt, q):
    """leap's cache + GQA attention over q new tokens = the HF model's own forward on the whole sequence."""
    stack = LayerStack(tiny_any)
    ids = prompt + [(7 * i + 3) % 97 for i in range(q)]
    with torch.inference_mode():
        cache = stack.new_cache()
        stack.run_layers(stack.embed(prompt), stack.full_plan, cache, 0)
        ours = stack.logits(stack.run_layers(stack.embed(ids[len(prompt):]), stack.full_plan, cache, len(prompt)))
        theirs = tiny_any.hf_model(torch.tensor([ids])).logits[0, len(prompt):].float()
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=1e-4)


def test_eager_attention_leaves_cudnn_out_on_cuda_only(monkeypatch):
    """On CUDA an eager forward's SDPA may not pick cuDNN's attention (a plan per shape costs more than the step);
    elsewhere, and with the LEAP_CUDNN_ATTENTION=1 ablation, PyTorch's choice is left alone; on exit it is restored."""
    monkeypatch.delenv("LEAP_CUDNN_ATTENTION", raising=False)
    before = torch.backends.cuda.cudnn_sdp_enabled()
    with eager_attention(torch.device("cuda")):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.backends.cuda.math_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled() == before
    for device in ("cpu", torch.device("cpu")):
        with eager_attention(device):
            assert torch.backends.cuda.cudnn_sdp_enabled() == before
    monkeypatch.setenv("LEAP_CUDNN_ATTENTION", "1")
    with eager_attention("cuda"):
        assert torch.backends.cuda.cudnn_sdp_enabled() == before


def recording_eager_attention():
    """A stand-in for ``eager_attention`` that records each entry's device type (``calls``) and whether code runs
    inside it now (``inside`` non-empty): ``(context manager, inside, calls)``."""
    inside, calls = [], []

    @contextlib.contextmanager
    def recording(device):
        calls.append(torch.device(device).type)
        inside.append(True)
        try:
            yield
        finally:
            inside.pop()

    return recording, inside, calls


def test_eager_forwards_run_their_layers_under_eager_attention(tiny_llama, monkeypatch):
    """LayerStack.run_layers' eager branch and a batch's forward call every layer inside eager_attention (of the
    stack's device), so no eager forward on CUDA builds a cuDNN plan per key length."""
    from leap.core.decoding import batch_state
    from leap.core.decoding.batch import BatchDecoder
    from leap.core.modeling import layers as layers_module

    recording, inside, calls = recording_eager_attention()

    def checked(module):
        real = module.layer_call

        def call(*args, **kwargs):
            assert inside, f"a layer ran outside eager_attention ({module.__name__})"
            return real(*args, **kwargs)
        return call

    for module in (layers_module, batch_state):
        monkeypatch.setattr(module, "eager_attention", recording)
        monkeypatch.setattr(module, "layer_call", checked(module))
    stack = LayerStack(tiny_llama)
    with torch.inference_mode():
        stack.run_layers(stack.embed([5, 9, 14]), stack.full_plan, stack.new_cache(), 0)
    BatchDecoder(tiny_llama).generate([[5, 9, 14], [3, 8, 2, 7]], max_new_tokens=4)
    assert len(calls) >= 4 + 2 and set(calls) == {"cpu"}  # the stack's prefill and steps, the batch's
