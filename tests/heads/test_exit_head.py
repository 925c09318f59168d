"""Exit heads on a layer k < L (Kangaroo / DVI, issue 19): the untrained head is the plain early exit; drafts
run only the layers below k and are lossless (greedy identity, T = 1 chi-square with a negative control);
training learns a map the early exit gets wrong, and a trained head's drafts are accepted in real decoding."""

from __future__ import annotations

import pytest
import torch

from leap.core import SelfSpecDecoder
from leap.core.config import LayerConfig
from leap.core.errors import SettingsError
from leap.core.modeling.model import wrap_model
from leap.heads.data import layer_states
from leap.heads.exit_drafter import ExitHeadDrafter
from leap.heads.exit_head import ExitHead, load_exit_head, train_exit_head
from leap.heads.head import FeatureHead, head_record, save_head
from tests.heads.test_heads import _walk_data, check_three_token_samples
from tests.tiny import tiny_hf_model, tiny_tokenizer


def test_the_untrained_exit_head_is_the_plain_early_exit(tiny_llama):
    """norm(h): the final norm and LM head read layer k directly, so the ablation baseline is the early exit."""
    head = ExitHead.from_model(tiny_llama, layer=2)
    hidden = torch.randn(1, 5, tiny_llama.config.hidden_size) * 3
    with torch.no_grad():
        assert torch.allclose(head(hidden), tiny_llama.norm(hidden), atol=1e-6)


@pytest.mark.parametrize("skip", [(), (1,), (3,)])
def test_exit_drafts_run_only_the_layers_below_k_and_are_lossless(tiny_any, skip):
    """Greedy output equals plain decoding; every drafted token cost the layers below k that the step's
    configuration executes (all of them when it has none: then an exact prefix verification reuses)."""
    prompt, k = [5, 6, 7, 8, 9, 10], 3
    plain = SelfSpecDecoder(tiny_any, None).generate(prompt, max_new_tokens=30)
    config = LayerConfig.from_sets(tiny_any.num_layers, skip=list(skip)) if skip else None
    calls = [0] * tiny_any.num_layers
    hooks = [layer.register_forward_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
             for i, layer in enumerate(tiny_any.layers)]
    try:
        out = SelfSpecDecoder(tiny_any, config, drafter=ExitHeadDrafter(layer=k, head="untrained")).generate(
            prompt, max_new_tokens=30)
    finally:
        for h in hooks:
            h.remove()
    assert out.token_ids == plain.token_ids
    assert out.config == f"drafter:exit-head@{k}" + (f"+{config}" if skip and min(skip) < k else "")
    drafted = [s for s in out.steps if s.layer_tokens]
    assert drafted, "the exit head drafted nothing"
    below = k - len([i for i in skip if i < k])
    assert all(s.layer_passes == s.layer_tokens * below for s in drafted)
    # layers from k on ran only in the prefill and in each step's verification, never while drafting
    assert calls[k:] == [1 + len(out.steps)] * (tiny_any.num_layers - k), calls


def test_exit_head_samples_follow_the_target_distribution(monkeypatch):
    """T = 1: the layer draft samples from the exit head's distribution; the rule keeps the target's (chi-square,
    with an accept-all negative control)."""
    check_three_token_samples(ExitHeadDrafter(layer=2, head="untrained"), monkeypatch)


def _upper_map_model(vocab: int = 48):
    """A toy whose upper layer changes the next token position-wise: attention adds nothing anywhere, layer 0's
    MLP adds nothing, layer 1's MLP is large and random - so the full model's next token is a fixed function
    of the current one that the early exit after layer 0 (reading the bare embedding) mostly gets wrong, and
    a position-wise exit head on layer 1 can learn."""
    hf = tiny_hf_model("llama", vocab=vocab, eos_token_id=None, layers=2, init=0.3, seed=5)
    with torch.no_grad():
        for layer in hf.model.layers:
            layer.self_attn.o_proj.weight.zero_()
        hf.model.layers[0].mlp.down_proj.weight.zero_()
        hf.model.layers[1].mlp.down_proj.weight.mul_(8.0)
    return wrap_model(hf, tiny_tokenizer(False), name="tiny-upper-map")


@pytest.fixture(scope="module")
def toy():
    model = _upper_map_model()
    data = _walk_data(model, n_seq=96, length=16)
    states = layer_states(model, data, 1, progress=False)
    head, record = train_exit_head(model, data, states, 1, rank=32, epochs=6, lr=1e-2, batch=128, vocab_size=48,
                                   seed=0, progress=False, log=lambda *_: None)
    return model, data, head, record


def test_training_learns_what_the_early_exit_gets_wrong(toy):
    _, _, _, record = toy
    assert record["heldout_top1_untrained"] < 0.5, record
    assert record["history"][-1]["heldout_top1"] > 0.9, record


def test_a_trained_exit_heads_drafts_are_accepted_in_real_decoding(toy):
    """Drafting reads the same layer-k states as training: most drafts are accepted, output is plain greedy
    output. Reading another layer's state, or a shifted position, turns this red."""
    model, _, head, _ = toy
    starts = torch.randint(4, model.vocab_size, (8, 2), generator=torch.Generator().manual_seed(11)).tolist()

    def acceptance(drafter) -> float:  # over several starts: one start soon cycles through a few tokens
        drafted = accepted = 0
        for prompt in starts:
            plain = SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=12)
            out = SelfSpecDecoder(model, None, drafter=drafter).generate(prompt, max_new_tokens=12)
            assert out.token_ids == plain.token_ids
            drafted += out.draft_tokens_proposed
            accepted += sum(s.accepted for s in out.steps)
        return accepted / drafted

    trained, early = acceptance(ExitHeadDrafter(head=head)), acceptance(ExitHeadDrafter(layer=1, head="untrained"))
    assert trained > 0.8 and early < trained - 0.3, (trained, early)


def test_exit_heads_save_load_and_refuse_the_wrong_file(tmp_path, tiny_llama, toy):
    model, _, head, record = toy
    path = save_head(head, tmp_path / "exit.safetensors", {**record, "model": model.name})
    loaded = load_exit_head(model, path)
    x = torch.randn(3, model.config.hidden_size)
    with torch.no_grad():
        assert torch.allclose(loaded(x), head(x), atol=1e-6)
    assert head_record(path)["layer"] == 1
    assert head_record(path)["draft_vocab_size"] == loaded.vocab_ids.numel()  # beside the target's vocab_size
    with pytest.raises(SettingsError, match="trained for"):
        load_exit_head(tiny_llama, path)
    eagle = save_head(FeatureHead.from_model(model), tmp_path / "eagle.safetensors", {"model": model.name})
    with pytest.raises(SettingsError, match="EAGLE head"):
        load_exit_head(model, eagle)
    with pytest.raises(SettingsError, match="trained on layer 1"):
        SelfSpecDecoder(model, None, drafter=ExitHeadDrafter(layer=2, head=str(path))).generate([3, 4], max_new_tokens=4)


@pytest.mark.parametrize("layer", [0, 6, 9])
def test_an_exit_layer_outside_the_model_is_refused_with_the_fix(tiny_llama, layer):
    with pytest.raises(SettingsError, match="layer must be|--drafter eagle"):
        SelfSpecDecoder(tiny_llama, None, drafter=ExitHeadDrafter(layer=layer, head="untrained")).generate(
            [3, 4], max_new_tokens=4)


def test_no_trained_exit_head_makes_the_drafter_unavailable_with_the_command(tiny_llama, monkeypatch, tmp_path):
    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    reason = ExitHeadDrafter.unavailable(tiny_llama, layer=2)
    assert reason and "leap train-head" in reason and "--layer 2" in reason
    assert ExitHeadDrafter.unavailable(tiny_llama, layer=2, head="untrained") is None


def test_an_interrupted_exit_head_training_resumes_to_the_same_head(tmp_path):
    """Deterministic for a seed, and a run stopped after its first epoch resumes from the checkpoint to the
    very head an uninterrupted run makes (the epoch's shuffle is a function of seed and epoch)."""
    model = _upper_map_model(32)
    data = _walk_data(model, n_seq=32, length=12)
    states = layer_states(model, data, 1, progress=False)
    args = dict(rank=16, epochs=2, lr=1e-2, batch=64, vocab_size=32, seed=1, progress=False)
    whole, _ = train_exit_head(model, data, states, 1, log=lambda *_: None, **args)

    def stop_after_first_epoch(message):
        if "epoch 1:" in message:
            raise KeyboardInterrupt

    ckpt = tmp_path / "exit.ckpt"
    with pytest.raises(KeyboardInterrupt):
        train_exit_head(model, data, states, 1, checkpoint=ckpt, log=stop_after_first_epoch, **args)
    messages = []
    resumed, record = train_exit_head(model, data, states, 1, checkpoint=ckpt, log=messages.append, **args)
    assert any("resumed after epoch 1" in m for m in messages) and len(record["history"]) == 2
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)


def test_online_learning_lifts_an_exit_heads_acceptance_and_never_changes_the_output():
    """DVI-style online updates from each verified step: on the toy the early exit gets wrong, an untrained head
    that learns online is accepted far more often on later prompts than one that does not; outputs stay
    plain greedy outputs and the model's weights bit-identical (red without the optimiser step)."""
    model = _upper_map_model()
    weights = {k: v.clone() for k, v in model.hf_model.state_dict().items()}
    starts = torch.randint(4, model.vocab_size, (16, 2), generator=torch.Generator().manual_seed(11)).tolist()

    def later_acceptance(drafter) -> float:
        accepted = drafted = 0
        for i, prompt in enumerate(starts):
            plain = SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=16)
            out = SelfSpecDecoder(model, None, drafter=drafter).generate(prompt, max_new_tokens=16)
            assert out.token_ids == plain.token_ids
            if i >= 8:
                accepted += sum(s.accepted for s in out.steps)
                drafted += out.draft_tokens_proposed
        return accepted / drafted

    still = later_acceptance(ExitHeadDrafter(layer=1, head="untrained"))
    learner = ExitHeadDrafter(layer=1, head="untrained", online=True, online_every=2, online_window=16, online_lr=1e-2)
    learnt = later_acceptance(learner)
    assert learnt > still + 0.3, (still, learnt)
    assert learner.head.up.weight.abs().sum() > 0  # the head changed (it starts at zero) ...
    for k, v in model.hf_model.state_dict().items():  # ... and the model did not
        assert torch.equal(v, weights[k]), k


def test_bad_online_settings_are_refused_when_the_exit_drafter_is_made():
    with pytest.raises(SettingsError, match="online learning"):
        ExitHeadDrafter(online=True, online_every=0)


@pytest.mark.parametrize("shape", ["eagle2", "opt"])
def test_online_learning_on_trees_is_refused_not_silently_idle(shape):
    """Issue 33: online=true with a tree shape made 0 updates (exit states reach the drafter on the chain path
    only); it is refused with the fix."""
    with pytest.raises(SettingsError, match="shape=chain"):
        ExitHeadDrafter(online=True, shape=shape)


def test_a_heads_recorded_command_names_only_the_settings_its_kind_used():
    import argparse

    from leap.cli import build_parser
    from leap.cli.train_head import record_command

    parser = build_parser()
    exit_args = parser.parse_args(["train-head", "--layer", "10", "--epochs", "4"])
    eagle_args = parser.parse_args(["train-head", "--epochs", "8"])
    assert isinstance(exit_args, argparse.Namespace)
    exit_command, eagle_command = record_command(exit_args, True), record_command(eagle_args, False)
    assert "--layer 10" in exit_command and "--rank 256" in exit_command and "--epochs 4" in exit_command
    assert not any(f in exit_command for f in ("--noise", "--feature-weight", "--batch-tokens"))
    assert "--noise 0.1" in eagle_command and "--rank" not in eagle_command and "--layer" not in eagle_command
