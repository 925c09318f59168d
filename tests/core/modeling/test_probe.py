"""ContextProbe evaluates on a fork of the session's cache and never changes the session."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core import LayerConfig, SelfSpecDecoder
from leap.core.modeling.probe import ContextProbe
from leap.search.agents.clasp import clasp_dp

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


@settings(max_examples=40)
@given(norms=st.lists(st.floats(0.1, 3.0), min_size=3, max_size=7, unique=True), data=st.data())
def test_clasp_dp_equals_brute_force_on_additive_layers(norms, data):
    """Layers that add orthogonal vectors: the final cosine to the full model's state falls with the summed
    squared norms of the skipped layers' vectors, so the best M-subset is known by brute force, and the DP's
    optimal substructure holds - it must find exactly that subset."""
    import itertools

    L = len(norms)
    skippable = set(data.draw(st.sets(st.integers(0, L - 1), min_size=1)))
    M = data.draw(st.integers(0, len(skippable)))
    dim = L + 1
    base = torch.zeros(dim, dtype=torch.float64)
    base[0] = 5.0
    vectors = [torch.zeros(dim, dtype=torch.float64).index_fill_(0, torch.tensor([i + 1]), n) for i, n in enumerate(norms)]
    targets = [base + sum(vectors[:i], torch.zeros(dim, dtype=torch.float64)) for i in range(L + 1)]
    run_layer = lambda i, h: h + vectors[i]  # noqa: E731

    def final_cos(skip):
        h = base.clone()
        for i in range(L):
            h = h if i in skip else run_layer(i, h)
        return torch.nn.functional.cosine_similarity(h, targets[L], dim=0).item()

    best = max(itertools.combinations(sorted(skippable), M), key=final_cos)
    assert clasp_dp(targets, run_layer, skippable, M) == sorted(best)
