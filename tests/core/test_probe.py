"""ContextProbe evaluates on a fork of the session's cache and never changes the session."""

from __future__ import annotations

import torch

from leap.core import LayerConfig, SelfSpecDecoder
from leap.core.probe import ContextProbe
from leap.search.clasp import clasp_dp

PROMPT = [5, 9, 14, 22, 31, 40, 8, 7, 11, 12]


def _lengths(session):
    return [layer.get_seq_length() for layer in session.cache.layers]


def test_probe_leaves_the_session_untouched_and_output_lossless(tiny_llama):
    plain = SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=20).token_ids
    session = SelfSpecDecoder(tiny_llama, LayerConfig.parse("EESSEE")).start(PROMPT, max_new_tokens=20)
    probe = ContextProbe(session)
    while not session.done:
        before = _lengths(session)
        keys = [layer.keys.clone() for layer in session.cache.layers]
        m = probe.matchness(LayerConfig.parse("ESSEEE"), window=6)
        targets, pos = probe.target_states()
        probe.run_layer(2, targets[2], pos)
        assert 0.0 <= m <= 1.0
        assert _lengths(session) == before
        assert all(torch.equal(k, layer.keys) for k, layer in zip(keys, session.cache.layers))
        session.step()
    assert session.new_token_ids == plain


def test_full_model_matchness_is_one_on_greedy_text(tiny_qwen2):
    session = SelfSpecDecoder(tiny_qwen2, None).start(PROMPT, max_new_tokens=12)
    while not session.done:
        session.step()
    probe = ContextProbe(session)
    assert probe.matchness(LayerConfig.full(6), window=10) == 1.0  # generated tokens are the argmaxes


def test_target_states_chain_and_clasp_dp(tiny_llama):
    session = SelfSpecDecoder(tiny_llama, None).start(PROMPT, max_new_tokens=4)
    session.step()
    probe = ContextProbe(session)
    targets, pos = probe.target_states()
    assert len(targets) == 7 and pos == len(session.tokens) - 2
    # running layer i on h*_i reproduces h*_{i+1}
    for i in range(6):
        assert torch.allclose(probe.run_layer(i, targets[i], pos), targets[i + 1], atol=1e-5)
    skipped = clasp_dp(targets, lambda i, h: probe.run_layer(i, h, pos), {1, 2, 3, 4}, 2)
    assert len(skipped) <= 2 and set(skipped) <= {1, 2, 3, 4}
    assert clasp_dp(targets, lambda i, h: probe.run_layer(i, h, pos), {1, 2, 3, 4}, 0) == []
