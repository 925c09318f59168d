"""The stand drafter (leap.core.drafters.stand): stochastic drafts keep the target distribution, bounded
and deterministic tables."""

import pytest
import torch

from leap.core import SelfSpecDecoder
from leap.core.drafters import make_drafter
from leap.core.verify.sampling import SamplingSettings
from tests.core.verify.test_sampling import NEGATIVE_N, _chi2_pvalue, _exact_three_token_distribution
from tests.tiny import tiny_model


@pytest.mark.heavy
def test_stochastic_stand_drafts_keep_the_target_distribution(monkeypatch):
    """Three-token outputs at T = 1 with stand drafting from its own q: chi-square against the exact target
    distribution; negative control: a rule that accepts every draft token fails the same test. ``top_k=2``
    keeps q (the top two tokens, renormalised) unlike p, so accepting blindly is visibly biased; with the
    full vocabulary stand's q would equal p on this repeated prompt and even a blind rule would pass."""
    model = tiny_model("llama", vocab=6, eos_token_id=None, init=0.3)
    prompt = [4, 1, 3]
    exact = _exact_three_token_distribution(model, prompt, SamplingSettings(1.0, 1.0))
    V, N = 6, 2000

    def sample(n=N):
        decoder = SelfSpecDecoder(model, None, drafter=make_drafter("stand", order=2, top_k=2))
        counts = torch.zeros(V ** 3)
        gen = torch.Generator().manual_seed(5)
        drafted = accepted = 0
        for _ in range(n):
            out = decoder.generate(prompt, max_new_tokens=3, generator=gen, temperature=1.0)
            a, b, c = out.token_ids
            counts[(a * V + b) * V + c] += 1
            drafted += out.draft_tokens_proposed
            accepted += out.draft_tokens_accepted
        return counts, drafted, accepted

    counts, drafted, accepted = sample()
    assert drafted > N and accepted > N // 4  # it really drafts, from learnt distributions, and is accepted
    assert _chi2_pvalue(counts, exact) > 1e-3

    import leap.core.decoding.session as decoder_module
    from leap.core.verify.sampling import sample as sample_token

    def accept_all(draft, q, p, generator):
        return len(draft), sample_token(p[len(draft)], generator)

    monkeypatch.setattr(decoder_module, "speculative_accept", accept_all)
    assert _chi2_pvalue(sample(NEGATIVE_N)[0], exact) < 1e-6  # a gross bias: far fewer samples show it


def test_tables_stay_within_their_bound_and_evict_least_recent():
    stand = make_drafter("stand", order=3, max_entries=50)
    stand.begin([1, 2, 3])
    gen = torch.Generator().manual_seed(0)
    for step in range(200):
        inputs = [step % 13 + 4, step % 17 + 4]  # the previous step's own token, then an accepted draft
        stand.observe(inputs, torch.randn(2, 30, generator=gen))
        assert len(stand.table) <= 50
    recent = tuple(stand.history[-1:])
    assert recent in stand.table and len(stand.history) == 3 + 1 + 2 * 199  # the first pending token is the prompt's


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


def test_tables_stay_within_their_bound_over_a_long_generation(tiny_llama):
    """Every step of a 150-token generation (greedy and sampled) leaves at most ``max_entries`` contexts."""
    from leap.core.drafters.stand import Stand

    for temperature, shape in ((0.0, "chain"), (1.0, "best-first")):
        stand = Stand(order=3, max_entries=40, shape=shape, tree_nodes=4)
        session = SelfSpecDecoder(tiny_llama, None, drafter=stand).start([5, 6, 7, 5, 6], max_new_tokens=150,
                                                                          temperature=temperature, seed=0)
        while not session.done:
            session.step()
            assert len(stand.table) <= 40
        # it learnt from every verified token, repeated ones included (all but the last, never verified)
        assert len(stand.history) == 5 + len(session.new_token_ids) - 1
        assert stand.history == session.tokens[:-1]


def test_running_mean_merges_repeat_sightings():
    stand = make_drafter("stand", order=1, top_k=2)
    stand.begin([1])
    stand.observe([1], torch.log(torch.tensor([[0.7, 0.2, 0.1]])))  # context (1,): {0: 0.7/0.9, 1: 0.2/0.9}
    stand.history = [1]
    stand.observe([1], torch.log(torch.tensor([[0.1, 0.2, 0.7]])))  # second sighting: {2: .7/.9, 1: .2/.9}
    ids, probs, seen = stand.table[(1,)]
    first = {0: 0.7 / 0.9, 1: 0.2 / 0.9}
    second = {2: 0.7 / 0.9, 1: 0.2 / 0.9}
    merged = {t: (first.get(t, 0) + second.get(t, 0)) / 2 for t in (0, 1, 2)}
    top = sorted(merged, key=lambda t: (-merged[t], t))[:2]
    assert seen == 2 and list(ids) == top
    assert probs == pytest.approx([merged[t] / sum(merged[u] for u in top) for t in top])
