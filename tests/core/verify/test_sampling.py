"""Speculative sampling keeps the target distribution (Leviathan et al. 2023, Theorem 1), tested statistically.

Tolerances: a chi-square goodness-of-fit test must not reject at p > 0.001 (cells with expected count
below 5 pooled), and the total-variation distance must stay below 0.1 with N = 3000 samples; seeds
are fixed, so the outcome is deterministic. As a negative control, the same test must reject the
draft's own distribution (p < 1e-6), so the test has the power to fail.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from leap.core import LayerConfig, SelfSpecDecoder
from leap.core.verify.sampling import (DenseDraw, SamplingSettings, draft_rows, greedy_accept, greedy_accept_rows,
                                      speculative_accept, target_probs)
from tests.tiny import tiny_model


#: samples for the negative controls (a rule that accepts every draft): their bias is gross, so p < 1e-6 needs
#: far fewer samples than the positive tests' power against subtle bugs (checked: red at this N)
NEGATIVE_N = 400


def _chi2_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Chi-square p-value, pooling cells with expected count < 5 into one."""
    n = counts.sum()
    expected = probs * n
    big = expected >= 5
    obs = torch.cat([counts[big], counts[~big].sum().view(1)])
    exp = torch.cat([expected[big], expected[~big].sum().view(1)])
    if exp[-1] < 5:  # nothing (or too little) pooled: drop the pooled cell, renormalise
        obs, exp = obs[:-1], exp[:-1] * obs[:-1].sum() / exp[:-1].sum()
    return float(stats.chisquare(obs.numpy(), exp.numpy()).pvalue)


def test_speculative_accept_on_synthetic_distributions():
    gen = torch.Generator().manual_seed(0)
    V = 6
    p = torch.tensor([[0.4, 0.3, 0.1, 0.1, 0.05, 0.05], [0.2, 0.2, 0.2, 0.2, 0.1, 0.1]])
    q = torch.tensor([[0.05, 0.05, 0.3, 0.3, 0.2, 0.1]])
    counts = torch.zeros(V)
    q_counts = torch.zeros(V)
    N = 20000
    for _ in range(N):
        x = int(torch.multinomial(q[0], 1, generator=gen))
        q_counts[x] += 1
        accepted, nxt = speculative_accept([x], q, p, gen)
        counts[x if accepted == 1 else nxt] += 1
    assert _chi2_pvalue(counts, p[0]) > 1e-3
    assert _chi2_pvalue(q_counts, p[0]) < 1e-6  # the draft alone is far from the target


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.lists(st.floats(0.0, 1.0), min_size=7, max_size=7), st.booleans()),
                     min_size=1, max_size=6))
def test_draft_rows_read_dense_draws_as_their_maps(rows):
    """A dense draw (the whole vocabulary, one tensor) reads as the ``{token: q}`` map of its non-zero
    probabilities, and ``draft_rows`` fills the same ``[n, V]`` rows from any mix of dense draws and maps."""
    probs = [torch.tensor(w) + 0.5 * torch.eye(7)[i % 7] for i, (w, _) in enumerate(rows)]  # never all zero
    probs = [p / p.sum() for p in probs]
    maps = [{t: float(v) for t, v in enumerate(p.tolist()) if v > 0} for p in probs]
    mixed = [DenseDraw(p) if dense else m for p, m, (_, dense) in zip(probs, maps, rows)]
    for p, m in zip(probs, maps):
        d = DenseDraw(p)
        assert dict(d) == pytest.approx(m) and len(d) == len(m)
        assert d.get(7, 0.0) == 0.0 and d.get(-1, 0.0) == 0.0
    assert torch.allclose(draft_rows(mixed, 7, "cpu"), draft_rows(maps, 7, "cpu"))


def test_greedy_accept():
    logits = torch.full((4, 10), -1.0)
    for row, tok in enumerate([3, 4, 9, 1]):
        logits[row, tok] = 1.0
    assert greedy_accept([3, 4, 9], logits) == (3, 1)
    assert greedy_accept([3, 5, 9], logits) == (1, 4)
    assert greedy_accept([], logits[:1]) == (0, 3)


@given(rows=st.lists(st.tuples(st.lists(st.integers(0, 5), max_size=4), st.integers(0, 2**31 - 1)), min_size=1,
                     max_size=5))
@settings(max_examples=60, deadline=None)
def test_greedy_accept_rows_is_greedy_accept_of_each_row(rows):
    """The batch's one read gives every row what its own greedy_accept gives (rows padded to the longest chain, small
    vocabularies so that drafts often match)."""
    q = 1 + max(len(draft) for draft, _ in rows)
    logits = torch.stack([torch.randn(q, 6, generator=torch.Generator().manual_seed(seed)) for _, seed in rows])
    drafts = [draft for draft, _ in rows]
    assert greedy_accept_rows(drafts, logits) == [greedy_accept(d, logits[i, : len(d) + 1]) for i, d in enumerate(drafts)]


def test_top_p_keeps_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    probs = target_probs(logits, SamplingSettings(1.0, 0.75))
    assert torch.allclose(probs, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    hot = target_probs(logits, SamplingSettings(2.0, 1.0))
    assert hot[0, 3] > 0.05 and torch.isclose(hot.sum(), torch.tensor(1.0))


def _exact_two_token_distribution(model, prompt, settings):
    """P(x1, x2 | prompt) of the target model by enumeration (small vocabulary)."""
    hf = model.hf_model
    with torch.inference_mode():
        p1 = target_probs(hf(torch.tensor([prompt])).logits[0, -1:], settings)[0]
        V = p1.shape[0]
        seqs = torch.tensor([prompt + [x] for x in range(V)])
        p2 = target_probs(hf(seqs).logits[:, -1], settings)  # [V, V]
    return (p1[:, None] * p2).flatten()


def _sample_pairs(decoder, prompt, N, **kw):
    V = decoder.model.vocab_size
    counts = torch.zeros(V * V)
    gen = torch.Generator().manual_seed(1234)
    for _ in range(N):
        ids = decoder.generate(prompt, max_new_tokens=2, generator=gen, **kw).token_ids
        counts[ids[0] * V + ids[1]] += 1
    return counts


@pytest.mark.heavy
@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_speculative_samples_follow_the_target_distribution(temperature, top_p):
    """Two-token outputs of a draft that differs from the target, against exact target probabilities."""
    model = tiny_model("llama", vocab=12, eos_token_id=None, init=0.3)
    prompt = [4, 7, 2]
    settings = SamplingSettings(temperature, top_p)
    exact = _exact_two_token_distribution(model, prompt, settings)
    config = LayerConfig.parse("ESSSSE")
    decoder = SelfSpecDecoder(model, config, "fixed", policy_kwargs={"k": 2})
    N = 3000
    counts = _sample_pairs(decoder, prompt, N, temperature=temperature, top_p=top_p)
    assert _chi2_pvalue(counts, exact) > 1e-3
    tv = 0.5 * (counts / N - exact).abs().sum()
    assert tv < 0.1, f"total variation {tv:.3f}"

    # Negative control: the draft's own two-token distribution (drafts are accepted without a check
    # when the verifier is replaced by the draft itself) must be rejected by the same test.
    draft_only = _draft_distribution(model, prompt, config, settings)
    assert 0.5 * (draft_only - exact).abs().sum() > 0.1
    assert _chi2_pvalue(counts, draft_only) < 1e-6


def _draft_distribution(model, prompt, config, settings):
    """P(x1, x2) when both tokens come from the draft (``config``'s layers only)."""
    from leap.core.modeling.layers import LayerStack, plan_for

    stack = LayerStack(model)
    plan = plan_for([a.passes for a in config.actions])
    V = model.vocab_size

    def probs(seq):
        with torch.inference_mode():
            cache = stack.new_cache()
            hidden = stack.run_layers(stack.embed(seq), plan, cache, 0)
            return target_probs(stack.logits(hidden)[-1:], settings)[0]

    p1 = probs(prompt)
    return torch.stack([p1[x] * probs(prompt + [x]) for x in range(V)]).flatten()


def test_greedy_matches_exact_argmax_chain():
    model = tiny_model("qwen2", vocab=12, eos_token_id=None)
    prompt = [4, 5]
    exact = _exact_two_token_distribution(model, prompt, SamplingSettings(1.0))
    out = SelfSpecDecoder(model, LayerConfig.parse("EESSEE")).generate(prompt, max_new_tokens=2)
    # greedy picks argmax of p1, then argmax of p2 given it: check the first token at least
    V = 12
    joint = exact.view(V, V)
    assert out.token_ids[0] == int(joint.sum(1).argmax())  # argmax of p(x1)
    assert out.token_ids[1] == int(joint[out.token_ids[0]].argmax())  # argmax of p(x2 | x1)


@pytest.mark.heavy
def test_deterministic_drafts_keep_the_target_distribution():
    """Prompt-lookup drafts (q one-hot) under speculative sampling: same two-token distribution."""
    model = tiny_model("llama", vocab=12, eos_token_id=None, init=0.3)
    prompt = [4, 7, 4, 7, 4]  # repetitive, so prompt lookup proposes tokens
    settings = SamplingSettings(1.0, 1.0)
    exact = _exact_two_token_distribution(model, prompt, settings)
    decoder = SelfSpecDecoder(model, None, drafter="prompt-lookup")
    assert decoder.generate(prompt, max_new_tokens=2, seed=0).draft_tokens_proposed > 0
    N = 3000
    counts = _sample_pairs(decoder, prompt, N, temperature=1.0)
    assert _chi2_pvalue(counts, exact) > 1e-3
    assert 0.5 * (counts / N - exact).abs().sum() < 0.1


def _exact_three_token_distribution(model, prompt, settings):
    """P(x1, x2, x3 | prompt) by enumeration (tiny vocabulary)."""
    hf = model.hf_model
    V = model.vocab_size
    with torch.inference_mode():
        p1 = target_probs(hf(torch.tensor([prompt])).logits[0, -1:], settings)[0]
        p2 = target_probs(hf(torch.tensor([prompt + [x] for x in range(V)])).logits[:, -1], settings)
        seqs = torch.tensor([prompt + [x, y] for x in range(V) for y in range(V)])
        p3 = target_probs(hf(seqs).logits[:, -1], settings).view(V, V, V)
    return (p1[:, None, None] * p2[:, :, None] * p3).flatten()


@pytest.mark.heavy
def test_hybrid_chains_of_fixed_and_sampled_draft_tokens_keep_the_target_distribution(monkeypatch):
    """A hybrid draft whose first token is model-free (q one-hot) and whose next comes from the
    layer-skip draft (q stochastic), verified together: three-token outputs follow the target.
    Negative control: a rule that accepts every draft token fails the same test."""
    from leap.core.drafters import Drafter, Hybrid

    class AlwaysTwo(Drafter):
        name = "always-two"

        def propose(self, tokens, max_tokens):
            return [2][:max_tokens]

    model = tiny_model("llama", vocab=6, eos_token_id=None, init=0.3)
    prompt = [4, 1, 3]
    settings = SamplingSettings(1.0, 1.0)
    exact = _exact_three_token_distribution(model, prompt, settings)
    decoder = SelfSpecDecoder(model, LayerConfig.parse("ESSSSE"), "fixed", policy_kwargs={"k": 2},
                              drafter=Hybrid(AlwaysTwo(), min_free=2))
    first = decoder.generate(prompt, max_new_tokens=3, seed=0)
    assert first.steps[0].drafted == 2 and first.steps[0].layer_passes > 0  # one fixed + one layer token
    V, N = 6, 2000

    def sample(n=N):
        counts = torch.zeros(V ** 3)
        gen = torch.Generator().manual_seed(99)
        for _ in range(n):
            a, b, c = decoder.generate(prompt, max_new_tokens=3, generator=gen, temperature=1.0).token_ids
            counts[(a * V + b) * V + c] += 1
        return counts

    assert _chi2_pvalue(sample(), exact) > 1e-3

    import leap.core.decoding.session as decoder_module

    def accept_all(draft, q, p, generator):  # no ratio test: the output follows the draft, not the target
        return len(draft), sample_token(p[len(draft)], generator)

    from leap.core.verify.sampling import sample as sample_token

    monkeypatch.setattr(decoder_module, "speculative_accept", accept_all)
    assert _chi2_pvalue(sample(NEGATIVE_N), exact) < 1e-6  # a gross bias: far fewer samples show it
