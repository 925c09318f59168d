"""The stand drafter (leap.core.drafters.stand): stochastic drafts keep the target distribution, bounded
and deterministic tables."""

import pytest
import torch

from leap.core import SelfSpecDecoder
from leap.core.drafters import make_drafter
from leap.core.sampling import SamplingSettings
from tests.core.test_sampling import _chi2_pvalue, _exact_three_token_distribution
from tests.tiny import tiny_model


def test_stochastic_stand_drafts_keep_the_target_distribution(monkeypatch):
    """Three-token outputs at T = 1 with stand drafting from its own q: chi-square against the exact target
    distribution; negative control: a rule that accepts every draft token fails the same test. ``top_k=2``
    keeps q (the top two tokens, renormalised) unlike p, so accepting blindly is visibly biased; with the
    full vocabulary stand's q would equal p on this repeated prompt and even a blind rule would pass."""
    model = tiny_model("llama", vocab=6, eos_token_id=None, init=0.3)
    prompt = [4, 1, 3]
    exact = _exact_three_token_distribution(model, prompt, SamplingSettings(1.0, 1.0))
    V, N = 6, 2000

    def sample():
        decoder = SelfSpecDecoder(model, None, drafter=make_drafter("stand", order=2, top_k=2))
        counts = torch.zeros(V ** 3)
        gen = torch.Generator().manual_seed(5)
        drafted = accepted = 0
        for _ in range(N):
            out = decoder.generate(prompt, max_new_tokens=3, generator=gen, temperature=1.0)
            a, b, c = out.token_ids
            counts[(a * V + b) * V + c] += 1
            drafted += out.draft_tokens_proposed
            accepted += out.draft_tokens_accepted
        return counts, drafted, accepted

    counts, drafted, accepted = sample()
    assert drafted > N and accepted > N // 4  # it really drafts, from learnt distributions, and is accepted
    assert _chi2_pvalue(counts, exact) > 1e-3

    import leap.core.decoder as decoder_module
    from leap.core.sampling import sample as sample_token

    def accept_all(draft, q, p, generator):
        return len(draft), sample_token(p[len(draft)], generator)

    monkeypatch.setattr(decoder_module, "speculative_accept", accept_all)
    assert _chi2_pvalue(sample()[0], exact) < 1e-6


def test_tables_stay_within_their_bound_and_evict_least_recent():
    stand = make_drafter("stand", order=3, max_entries=50)
    stand.begin([1, 2, 3])
    gen = torch.Generator().manual_seed(0)
    for step in range(200):
        inputs = [stand.history[-1], step % 17 + 4]
        stand.observe(inputs, torch.randn(2, 30, generator=gen))
        assert len(stand.table) <= 50
    recent = tuple(stand.history[-1:])
    assert recent in stand.table and len(stand.history) == 3 + 200


def test_updates_are_deterministic_for_a_history():
    logits = torch.randn(3, 40, generator=torch.Generator().manual_seed(1))
    a, b = make_drafter("stand"), make_drafter("stand")
    for d in (a, b):
        d.begin([7, 8, 9])
        d.observe([9, 10, 11], logits)
    assert a.table == b.table and list(a.table) == list(b.table)
    assert a.propose([7, 8, 9, 10, 11], 4) == b.propose([7, 8, 9, 10, 11], 4)


def test_bad_settings_are_refused():
    from leap.core.errors import SettingsError

    with pytest.raises(SettingsError, match="stand"):
        make_drafter("stand", order=0)
