"""EAGLE feature heads (issue 19): drafts are lossless (greedy identity, T = 1 chi-square with a negative
control), training learns a learnable map (an untrained head does not), and a trained head's drafts are
accepted in real decoding (so drafting and training agree on positions and features)."""

from __future__ import annotations

import pytest
import torch

from leap.core import SelfSpecDecoder
from leap.core.errors import SettingsError
from leap.core.verify.sampling import SamplingSettings
from leap.heads.data import DistillData, _features
from leap.heads.drafter import Eagle
from leap.heads.head import FeatureHead, head_record, load_head, save_head
from leap.heads.train import agreement, train_head
from tests.core.verify.test_sampling import _chi2_pvalue, _exact_three_token_distribution
from leap.core.modeling.model import wrap_model
from tests.tiny import tiny_hf_model, tiny_model, tiny_tokenizer


def _untrained(model):
    return FeatureHead.from_model(model)


def test_untrained_head_drafts_are_greedy_lossless(tiny_any):
    prompt = [5, 6, 7, 8, 9, 10]
    plain = SelfSpecDecoder(tiny_any, None).generate(prompt, max_new_tokens=40)
    for num_tokens in (1, 4):
        spec = SelfSpecDecoder(tiny_any, None, drafter=Eagle(num_tokens=num_tokens, head="untrained")).generate(
            prompt, max_new_tokens=40)
        assert spec.token_ids == plain.token_ids
        assert spec.draft_tokens_proposed > 0  # it really drafted


def _walk_data(model, n_seq=160, length=24, seed=0) -> DistillData:
    """Sequences of the model's own greedy continuations from random two-token starts: what training sees."""
    gen = torch.Generator().manual_seed(seed)
    decoder = SelfSpecDecoder(model, None)
    data = DistillData(record={"toy": True})
    starts = torch.randint(4, model.vocab_size, (n_seq, 2), generator=gen).tolist()
    outs = [start + decoder.generate(start, max_new_tokens=length).token_ids for start in starts]
    for i in range(0, len(outs), 32):
        batch = outs[i:i + 32]
        data.features.extend(_features(model, batch))
        data.tokens.extend(torch.tensor(s) for s in batch)
        data.prompt_lens.extend([2] * len(batch))
    return data


def _bigram_model(vocab: int = 64):
    """A learnable toy target: a 2-layer model whose layers add nothing to the residual stream and whose LM
    head maps token ``x`` to ``perm[x]`` with a wide margin, so its next token is a fixed permutation of the
    current one. The head must learn to read the next token's embedding (scale ~0.1) beside the feature
    (scale ~sqrt(H)); as initialised it mixes both and is right about half the time."""
    hf, gen = tiny_hf_model("llama", vocab=vocab, eos_token_id=None, layers=2, init=0.02, seed=3), \
        torch.Generator().manual_seed(0)
    perm = torch.randperm(vocab, generator=gen)
    with torch.no_grad():
        for layer in hf.model.layers:  # each layer adds nothing to the residual stream
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed = hf.model.embed_tokens.weight
        hf.lm_head.weight[perm] = embed / embed.norm(dim=-1, keepdim=True) * 10.0
    return wrap_model(hf, tiny_tokenizer(False), name="tiny-bigram")  # after the edits: wrapping packs linears


@pytest.fixture(scope="module")
def toy():
    model = _bigram_model()
    data = _walk_data(model)
    head, record = train_head(model, data, epochs=3, lr=3e-3, batch_tokens=512, vocab_size=64, seed=0,
                              progress=False, log=lambda *_: None)
    return model, data, head, record


def test_training_learns_the_models_next_token_map(toy):
    """Teacher-forced agreement on held-out sequences: high after training, low for the untrained head."""
    model, data, head, record = toy
    # untrained: [I | I] mixes the current feature with the next token, so it predicts perm of either
    assert record["heldout_top1_untrained"] < 0.7
    assert record["history"][-1]["heldout_top1"] > 0.95
    assert record["history"][-1]["heldout_top1"] == pytest.approx(
        agreement(model, head, data, list(range(len(data.tokens)))[:16]), abs=0.15)


def test_a_trained_heads_drafts_are_accepted_in_real_decoding(toy):
    """Drafting reads features and positions exactly as training did: most drafts are accepted, and
    output is plain greedy output. A shifted feature or position in the drafter turns this red."""
    model, _, head, _ = toy
    prompt = [17, 40]
    plain = SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=48)
    spec = SelfSpecDecoder(model, None, drafter=Eagle(num_tokens=4, head=head)).generate(prompt, max_new_tokens=48)
    assert spec.token_ids == plain.token_ids
    assert spec.acceptance_rate > 0.7, spec.acceptance_rate
    untrained = SelfSpecDecoder(model, None, drafter=Eagle(num_tokens=4, head="untrained")).generate(
        prompt, max_new_tokens=48)
    assert untrained.acceptance_rate < spec.acceptance_rate - 0.3


def check_three_token_samples(drafter, monkeypatch) -> None:
    """T = 1 on a 6-token model: three-token outputs of decoding with ``drafter`` match the exact target
    distribution (chi-square), and an accept-all rule - the negative control - fails the same test."""
    model = tiny_model("llama", vocab=6, eos_token_id=None, init=0.3)
    prompt = [4, 1, 3]
    exact = _exact_three_token_distribution(model, prompt, SamplingSettings(1.0, 1.0))
    decoder = SelfSpecDecoder(model, None, drafter=drafter)
    V, N = 6, 700

    def sample():
        counts, gen, drafted = torch.zeros(V ** 3), torch.Generator().manual_seed(7), 0
        for _ in range(N):
            out = decoder.generate(prompt, max_new_tokens=3, generator=gen, temperature=1.0)
            a, b, c = out.token_ids
            counts[(a * V + b) * V + c] += 1
            drafted += sum(s.drafted for s in out.steps)
        assert drafted >= N
        return counts

    assert _chi2_pvalue(sample(), exact) > 1e-3
    import leap.core.decoding.session as session_module
    from leap.core.verify.sampling import sample as sample_token

    monkeypatch.setattr(session_module, "speculative_accept",
                        lambda draft, q, p, generator: (len(draft), sample_token(p[len(draft)], generator)))
    assert _chi2_pvalue(sample(), exact) < 1e-6


def test_head_samples_follow_the_target_distribution(monkeypatch):
    check_three_token_samples(Eagle(num_tokens=2, head="untrained"), monkeypatch)


def test_heads_save_load_and_refuse_another_model(tmp_path, tiny_llama, toy):
    model, _, head, _ = toy
    path = save_head(head, tmp_path / "h.safetensors", {"model": model.name, "note": "toy"})
    loaded = load_head(model, path)
    assert head_record(path)["note"] == "toy" and torch.equal(loaded.vocab_ids, head.vocab_ids)
    for a, b in zip(head.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(a, b)
    with pytest.raises(SettingsError, match="train-head"):
        load_head(tiny_llama, path)  # another vocabulary
    with pytest.raises(SettingsError, match="train-head"):
        load_head(model, tmp_path / "missing.safetensors")


def test_an_interrupted_training_resumes_to_the_same_head(tmp_path):
    """Deterministic for a seed, and a run stopped after its first epoch resumes from the checkpoint to the
    very head an uninterrupted run makes (optimizer, schedule and random streams restored)."""
    model = _bigram_model(32)
    data = _walk_data(model, n_seq=40, length=12)
    args = dict(epochs=2, lr=3e-3, batch_tokens=256, vocab_size=32, seed=1, progress=False)
    whole, _ = train_head(model, data, log=lambda *_: None, **args)

    def stop_after_first_epoch(message):
        if "epoch 1:" in message:
            raise KeyboardInterrupt

    ckpt = tmp_path / "head.ckpt"
    with pytest.raises(KeyboardInterrupt):
        train_head(model, data, checkpoint=ckpt, log=stop_after_first_epoch, **args)
    messages = []
    resumed, record = train_head(model, data, checkpoint=ckpt, log=messages.append, **args)
    assert any("resumed after epoch 1" in m for m in messages) and len(record["history"]) == 2
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)


def test_train_head_out_takes_a_file_or_a_folder(tmp_path):
    """``--out DIR`` once crashed after a whole training run (the head was written over the folder)."""
    from leap.cli.train_head import head_path

    existing = tmp_path / "existing"
    existing.mkdir()
    assert head_path(str(existing), tmp_path / "cache") == existing / "head.safetensors"
    assert head_path(str(tmp_path / "new"), tmp_path / "cache") == tmp_path / "new" / "head.safetensors"
    assert (tmp_path / "new").is_dir()  # made before the work starts
    assert head_path(str(tmp_path / "h.safetensors"), tmp_path / "cache") == tmp_path / "h.safetensors"
    assert head_path(None, tmp_path / "cache") == tmp_path / "cache" / "head.safetensors"


def test_a_head_that_learnt_nothing_is_warned_about():
    """Issue 36: `leap train-head` wrote a head with held-out top-1 0.000 without a word."""
    from leap.cli.train_head import head_warning

    assert "learnt nothing" in head_warning({"heldout_top1_untrained": 0.0, "history": [{"heldout_top1": 0.0}]})
    assert "learnt nothing" in head_warning({"heldout_top1_untrained": 0.2, "history": [{"heldout_top1": 0.1}]})
    assert "untested" in head_warning({"history": []})
    assert head_warning({"heldout_top1_untrained": 0.05, "history": [{"heldout_top1": 0.45}]}) is None


def test_a_heads_drafting_attention_runs_under_eager_attention(tiny_llama, monkeypatch):
    """Drafting extends the head's cache by a key per step: on CUDA its attention leaves cuDNN out, like the
    stack's eager forwards (leap.core.modeling.kv_cache.eager_attention); training (no cache) is left alone."""
    import leap.heads.head as head_module
    from tests.core.modeling.test_kv_cache import recording_eager_attention

    recording, inside, entered = recording_eager_attention()
    real = head_module.call_layer
    seen = []

    def checked(*args, cache=None, **kwargs):
        seen.append((cache is not None, bool(inside)))
        return real(*args, cache=cache, **kwargs)

    monkeypatch.setattr(head_module, "eager_attention", recording)
    monkeypatch.setattr(head_module, "call_layer", checked)
    spec = SelfSpecDecoder(tiny_llama, None, drafter=Eagle(num_tokens=3, head="untrained"))
    spec.generate([5, 6, 7, 8, 9, 10], max_new_tokens=12)
    drafting = [under for cached, under in seen if cached]
    assert drafting and all(drafting) and set(entered) == {"cpu"}
