"""Losslessness and the cache invariant of the self-speculative decoder, on tiny random models."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from leap.core import LayerAction, LayerConfig, SelfSpecDecoder
from leap.core.errors import ConfigError, ContextLengthError, SettingsError
from leap.core.policies.base import draft_policies
from tests.tiny import VOCAB, tiny_model

NUM_LAYERS = 6

configs = st.lists(st.sampled_from(list(LayerAction)), min_size=NUM_LAYERS, max_size=NUM_LAYERS).filter(
    lambda a: any(x is not LayerAction.SKIP for x in a)
).map(lambda a: LayerConfig(tuple(a)))
prompts = st.lists(st.integers(4, VOCAB - 1), min_size=1, max_size=12)
policies = st.sampled_from(draft_policies.names()).flatmap(
    lambda name: st.tuples(st.just(name), st.integers(1, 6))
)


def _plain(model, prompt, n):
    return SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=n).token_ids


def _decoder(model, config, policy, reuse, draft_vocab):
    name, k = policy
    kwargs = {"k": k} if name == "fixed" else {"max_draft": k}
    if name not in {"fixed", "confidence", "adaptive-confidence", "adaedl"}:
        kwargs = {}  # third-party policy: its defaults
    return SelfSpecDecoder(model, config, name, policy_kwargs=kwargs, reuse_prefix=reuse, draft_vocab=draft_vocab)


@given(config=configs, policy=policies, prompt=prompts, n=st.integers(1, 24), reuse=st.booleans(),
       draft_vocab=st.sampled_from([None, 8, 40]))
def test_greedy_is_token_identical_to_plain_decoding(tiny_any, config, policy, prompt, n, reuse, draft_vocab):
    expected = _plain(tiny_any, prompt, n)
    got = _decoder(tiny_any, config, policy, reuse, draft_vocab).generate(prompt, max_new_tokens=n)
    assert got.token_ids == expected
    assert got.new_tokens <= n
    assert sum(got.accepted_lengths) == got.new_tokens


@given(config=configs, prompt=prompts, n=st.integers(1, 20), reuse=st.booleans())
def test_cache_holds_every_committed_token_but_the_pending_one(tiny_llama, config, prompt, n, reuse):
    session = SelfSpecDecoder(tiny_llama, config, "fixed", policy_kwargs={"k": 3}, reuse_prefix=reuse).start(
        prompt, max_new_tokens=n
    )
    layers = range(tiny_llama.num_layers)
    assert [session.cache.layers[i].get_seq_length() for i in layers] == [len(prompt) - 1] * len(layers)
    while not session.done:
        session.step()
        lengths = {session.cache.layers[i].get_seq_length() for i in layers}
        assert lengths == {len(session.tokens) - 1}


@given(prompt=prompts, n=st.integers(2, 16), data=st.data())
def test_configuration_may_change_every_step(tiny_qwen2, prompt, n, data):
    """Search agents propose a new configuration per step; output must still match plain decoding."""
    session = SelfSpecDecoder(tiny_qwen2, None).start(prompt, max_new_tokens=n)
    while not session.done:
        session.step(data.draw(st.one_of(st.none(), configs)))
    assert session.new_token_ids == _plain(tiny_qwen2, prompt, n)


def test_eos_stops_generation():
    model = tiny_model("llama", eos_token_id=None)
    prompt = [5, 9, 14]
    free = SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=30).token_ids
    # make a token that first appears mid-way through the continuation the EOS token
    i = next(i for i in range(3, 30) if free[i] not in free[:i])
    model.config.eos_token_id = model.hf_model.generation_config.eos_token_id = free[i]
    plain = SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=30)
    assert plain.token_ids == free[: i + 1] and plain.stop_reason == "eos"
    for config in ("EESEEE", "EEEEEE", "ESSSSR"):
        spec = SelfSpecDecoder(model, LayerConfig.parse(config), "fixed", policy_kwargs={"k": 4}).generate(
            prompt, max_new_tokens=30
        )
        assert spec.token_ids == plain.token_ids and spec.stop_reason == "eos"


def test_outcome_record(tiny_llama):
    out = SelfSpecDecoder(tiny_llama, LayerConfig.parse("EESSEE"), "fixed", policy_kwargs={"k": 3}).generate(
        [5, 6, 7], max_new_tokens=12
    )
    d = out.to_dict(with_steps=True)
    for key in ("text", "token_ids", "new_tokens", "wall_time_s", "mean_accepted", "steps", "prefill_time_s",
                "accepted_lengths", "draft_tokens_proposed", "draft_tokens_accepted", "layers_per_draft_token",
                "draft_time_s", "verify_time_s", "overhead_s"):
        assert key in d
    assert d["new_tokens"] == 12 and d["steps"] == len(d["step_records"])
    assert d["layers_per_draft_token"] == 4  # two of six layers skipped
    steps = d["step_records"]
    assert d["accepted_lengths"] == [s["committed"] for s in steps] and sum(d["accepted_lengths"]) == 12
    assert d["mean_accepted"] == pytest.approx(12 / len(steps))
    assert d["draft_tokens_proposed"] == sum(s["drafted"] for s in steps)
    assert d["draft_tokens_accepted"] == sum(s["accepted"] for s in steps)
    assert all(s["committed"] == min(s["accepted"] + 1, 12) or s is steps[-1] for s in steps)
    assert d["draft_time_s"] == pytest.approx(sum(s["draft_time_s"] for s in steps))
    assert d["wall_time_s"] == pytest.approx(d["prefill_time_s"] + d["draft_time_s"] + d["verify_time_s"])
    assert d["text"] == tiny_llama.decode(d["token_ids"])


def test_plain_decoding_matches_transformers_generate(tiny_qwen2):
    prompt = [5, 9, 11, 40]
    ids = tiny_qwen2.hf_model.generate(torch.tensor([prompt]), max_new_tokens=20, do_sample=False,
                                       eos_token_id=None, pad_token_id=0)
    assert SelfSpecDecoder(tiny_qwen2, None).generate(prompt, max_new_tokens=20).token_ids == ids[0, 4:].tolist()


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"temperature": -1.0}, SettingsError, "temperature must be"),
        ({"temperature": float("nan")}, SettingsError, "temperature must be"),
        ({"top_p": 0.0}, SettingsError, "top_p must be in"),
        ({"top_p": 1.5}, SettingsError, "top_p must be in"),
        ({"max_new_tokens": 0}, SettingsError, "max_new_tokens must be at least 1"),
        ({"max_new_tokens": 300}, ContextLengthError, "shorten the prompt or lower --max-new-tokens"),
    ],
)
def test_bad_generation_settings(tiny_llama, kwargs, error, message):
    with pytest.raises(error, match=message):
        SelfSpecDecoder(tiny_llama, None).generate([5, 6], **{"max_new_tokens": 4, **kwargs})


def test_bad_prompts_and_configs(tiny_llama):
    decoder = SelfSpecDecoder(tiny_llama, None)
    with pytest.raises(SettingsError, match="prompt is empty"):
        decoder.generate([])
    with pytest.raises(SettingsError, match="outside the vocabulary"):
        decoder.generate([5, 1000])
    with pytest.raises(ConfigError, match="model has 6 layers"):
        SelfSpecDecoder(tiny_llama, LayerConfig.parse("EEE"))
    session = decoder.start([5, 6], max_new_tokens=2)
    with pytest.raises(ConfigError, match="model has 6 layers"):
        session.step(LayerConfig.parse("EES"))
    with pytest.raises(SettingsError, match="draft_vocab"):
        SelfSpecDecoder(tiny_llama, None, draft_vocab=0)


def test_finished_session_refuses_more_steps(tiny_llama):
    session = SelfSpecDecoder(tiny_llama, None).start([5], max_new_tokens=1)
    session.step()
    assert session.done
    with pytest.raises(RuntimeError, match="finished"):
        session.step()


def test_same_seed_same_samples(tiny_llama):
    decoder = SelfSpecDecoder(tiny_llama, LayerConfig.parse("ESESEE"))
    a = decoder.generate([5, 6], max_new_tokens=16, temperature=1.0, top_p=0.9, seed=7)
    b = decoder.generate([5, 6], max_new_tokens=16, temperature=1.0, top_p=0.9, seed=7)
    assert a.token_ids == b.token_ids


def test_a_greedy_layer_chain_drafted_past_eos_stops_at_the_targets_eos():
    """Greedy layer chains keep their tokens on the device until verification (one read per step), so a
    chain can run past an end-of-sequence token; the step must still end at the target's EOS, with the
    accepted count (what drafters and policies learn from) counting nothing beyond it."""
    from tests.tiny import tiny_model

    prompt = [5, 9, 14, 20, 7, 11]
    plain = SelfSpecDecoder(tiny_model(eos_token_id=None), None).generate(prompt, max_new_tokens=12).token_ids
    stop = next(i for i in range(3, 12) if plain[i] not in plain[:i] and plain[i] != 3)
    model = tiny_model(eos_token_id=plain[stop])  # same weights; that token now ends the sequence
    decoder = SelfSpecDecoder(model, LayerConfig.parse("E" * model.num_layers), "fixed", policy_kwargs={"k": 8})
    out = decoder.generate(prompt, max_new_tokens=12)
    assert out.token_ids == plain[: stop + 1] and out.stop_reason == "eos"
    last = out.steps[-1]
    assert last.drafted > last.accepted and last.committed == last.accepted + 1, last
