"""Batched decoding (issue 37): every row of every batch is what decoding that prompt alone gives.

Greedy: token identity per row against :class:`SelfSpecDecoder` plain decoding of the prompt alone, on random
batches (sizes, prompt lengths, drafters, chain caps, budgets; EOS stops on the tiny Llama, a sliding window on
the tiny Mistral). Sampling: each row's two-token distribution against the exact target distribution, with a
negative control (a rule that accepts every draft) the same test rejects.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from leap.core import SelfSpecDecoder
from leap.core.config import LayerConfig
from leap.core.decoding.batch import BatchDecoder, batch_refusal
from leap.core.drafters import Drafter
from leap.core.errors import SettingsError
from leap.core.verify.sampling import SamplingSettings, sample
from tests.core.verify.test_sampling import NEGATIVE_N, _chi2_pvalue, _exact_two_token_distribution
from tests.tiny import same_or_float_tie, tiny_model


def _alone(model, prompt, max_new):
    return SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=max_new)


class _NearOracle(Drafter):
    """Proposes the plain output of its prompt, wrong at every third position it proposes, shifted by its prompt's length (so rows accept
    different lengths every step and the batch's cache gets holes); the test fills :attr:`reference`."""

    name = "near-oracle"
    reference: dict[tuple, list[int]] = {}

    def begin(self, prompt):
        self.prompt = tuple(prompt)

    def propose(self, tokens, max_tokens):
        done = len(tokens) - len(self.prompt)
        out = list(self.reference[self.prompt][done: done + max_tokens])
        return [(t + 1) % 50 if (done + i + len(self.prompt)) % 3 == 2 else t for i, t in enumerate(out)]


prompts = st.lists(st.lists(st.integers(4, 12), min_size=1, max_size=18), min_size=1, max_size=4)


@given(batch=prompts, drafter=st.sampled_from([None, "prompt-lookup", "suffix", "oracle"]),
       cap=st.integers(0, 6), max_new=st.integers(1, 14))
@example(batch=[[4], [10, 9, 11, 11, 9, 7]], drafter=None, cap=0, max_new=5)  # a float32 tie on the tiny Qwen2
def test_every_row_is_plain_decoding_of_its_prompt_alone(tiny_any, batch, drafter, cap, max_new):
    alone = [_alone(tiny_any, p, max_new) for p in batch]
    if drafter == "oracle":
        _NearOracle.reference = {tuple(p): a.token_ids + [0] * 20 for p, a in zip(batch, alone)}
        drafter = _NearOracle
    out = BatchDecoder(tiny_any, drafter, num_tokens=cap, compact_min=0, compact_share=0).generate(batch, max_new_tokens=max_new)
    for p, row, ref in zip(batch, out.rows, alone):
        assert same_or_float_tie(tiny_any, p, row.token_ids, ref.token_ids), (row.token_ids, ref.token_ids)
        if row.token_ids != ref.token_ids:
            continue  # a float32 tie went the other way (tests/tiny.py): the rest of the row follows from it
        assert row.stop_reason == ref.stop_reason
        assert sum(row.accepted_lengths) == len(row.token_ids) and row.steps == len(row.accepted_lengths)


def test_a_row_that_accepts_more_leaves_holes_that_stay_masked(tiny_llama):
    """The near-oracle makes rows accept different lengths each step: without packing, holes pile up; with
    packing after every step, the cache is rebuilt from the rows' valid slots. Both stay identical."""
    batch = [[5, 6, 7, 8, 9, 10], [11, 4], [6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6], [9]]
    alone = [_alone(tiny_llama, p, 24) for p in batch]
    _NearOracle.reference = {tuple(p): a.token_ids + [0] * 20 for p, a in zip(batch, alone)}
    for compact in (0, 10_000):
        out = BatchDecoder(tiny_llama, _NearOracle, num_tokens=6, compact_min=compact, compact_share=0).generate(
            batch, max_new_tokens=24)
        assert [r.token_ids for r in out.rows] == [a.token_ids for a in alone]
        assert max(max(r.accepted_lengths) for r in out.rows) > 1  # drafts were accepted
        assert len({tuple(r.accepted_lengths[:3]) for r in out.rows}) > 1  # and rows differed


def test_rows_leave_at_their_own_stop(tiny_llama):
    batch = [[5, 6, 7], [8, 9, 10, 11]]
    out = BatchDecoder(tiny_llama).generate(batch, max_new_tokens=3)
    assert [len(r.token_ids) for r in out.rows] == [len(_alone(tiny_llama, p, 3).token_ids) for p in batch]
    short = BatchDecoder(tiny_llama).generate([[5, 6, 7]], max_new_tokens=1)
    assert len(short.rows[0].token_ids) == 1 and short.steps == 1


def test_drafters_that_cannot_draft_in_a_batch_are_refused_with_the_reason(tiny_llama):
    from leap.core.drafters import drafters

    assert "own layers" in batch_refusal(drafters.get("layer-skip"))
    assert batch_refusal(drafters.get("prompt-lookup")) is None
    with pytest.raises(SettingsError, match="layer-skip.*cannot draft in a batch"):
        BatchDecoder(tiny_llama, "layer-skip")
    with pytest.raises(SettingsError, match="num_tokens"):
        BatchDecoder(tiny_llama, num_tokens=-1)


def _sample_rows(model, prompts, batches, monkeypatch=None, accept_all=False, layer_config=None):
    """Two-token samples of each row over ``batches`` batch calls (row r of call c: seed 1000 c + r), drafted by
    prompt lookup or by ``layer_config``'s layers."""
    import leap.core.decoding.batch_session as batch_module  # where a batched step accepts

    if accept_all:  # the negative control: every draft token kept, then a sample from the target
        monkeypatch.setattr(batch_module, "speculative_accept",
                            lambda draft, q, p, g: (len(draft), sample(p[len(draft)], g)))
    V = model.vocab_size
    counts = [torch.zeros(V * V) for _ in prompts]
    decoder = (BatchDecoder(model, layer_config=layer_config, num_tokens=2) if layer_config is not None
               else BatchDecoder(model, "prompt-lookup", num_tokens=2))
    for c in range(batches):
        out = decoder.generate(prompts, max_new_tokens=2, temperature=1.0, seed=1000 * c)
        for r, row in enumerate(out.rows):
            counts[r][row.token_ids[0] * V + row.token_ids[1]] += 1
    return counts


@pytest.mark.heavy
def test_sampled_rows_follow_the_target_distribution_and_a_rule_that_keeps_every_draft_does_not(monkeypatch):
    model = tiny_model("llama", vocab=12, eos_token_id=None, init=0.3)
    repetitive, short = [4, 7, 4, 7, 4], [9, 2]  # prompt lookup drafts [7, 4] after the first; nothing after the second
    settings = SamplingSettings(1.0, 1.0)
    exact = {tuple(p): _exact_two_token_distribution(model, p, settings) for p in (repetitive, short)}
    prompts = [repetitive, short, repetitive]
    n = 1500
    counts = _sample_rows(model, prompts, n)
    for p, c in zip(prompts, counts):
        assert _chi2_pvalue(c, exact[tuple(p)]) > 1e-3
        assert 0.5 * (c / n - exact[tuple(p)]).abs().sum() < 0.12
    wrong = _sample_rows(model, prompts, NEGATIVE_N, monkeypatch, accept_all=True)
    assert _chi2_pvalue(wrong[0], exact[tuple(repetitive)]) < 1e-6



def test_lowbit_rows_adapt_their_chain_in_a_batch(tiny_llama, monkeypatch):
    """Issue 54: each lowbit row grows its chain where its drafts are accepted whole, in a batch as alone (lossless
    tests cannot see it; red when the batch gives its rows no feedback). The draft here is the target itself, in
    float32, so every chain is accepted whole and grows 2 -> 4 -> 6 -> 8."""
    from leap.core.drafters import lowbit as lowbit_module
    from tests.core.drafters.test_lowbit import FloatRunner

    monkeypatch.setattr(lowbit_module, "make_runner", lambda model, **kw: FloatRunner(model))
    monkeypatch.setattr(lowbit_module, "make_row_runners", lambda model, n, **kw: [FloatRunner(model) for _ in range(n)])
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12, 13]]
    decoder = BatchDecoder(tiny_llama, "lowbit", num_tokens=16,
                           drafter_kwargs={"num_tokens": 2, "adapt": 8, "backend": "torch-int8"})
    out = decoder.generate(prompts, max_new_tokens=40)
    assert [r.token_ids for r in out.rows] == [_alone(tiny_llama, p, 40).token_ids for p in prompts]
    assert [d.chain for d in decoder._pools[0]] == [8, 8]
    assert all(max(r.accepted_lengths) == 9 for r in out.rows)  # a chain of 8 accepted, and the target's token


def test_lowbit_rows_are_handed_their_own_prefill_and_stay_lossless(tiny_llama, monkeypatch):
    """Issue 35's KV handoff in a batch: each lowbit row's draft cache starts as its own prompt's keys and values from
    its own prefill (not the batch's padded slots), none is fed its prompt, and every row is its prompt decoded
    alone (red when the batch hands no cache, or one row another's)."""
    from leap.core.modeling.low_bit import TorchInt8Runner

    handed, fed = [], []
    take, feed = TorchInt8Runner.take_kv, TorchInt8Runner._feed

    def spy_take(self, tokens, kv):
        keys = kv.layer(0)[0]
        handed.append((list(tokens), keys.clone()))
        return take(self, tokens, kv)

    monkeypatch.setattr(TorchInt8Runner, "take_kv", spy_take)
    monkeypatch.setattr(TorchInt8Runner, "_feed", lambda self, tokens: (fed.append(list(tokens)), feed(self, tokens))[1])
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17, 18, 19, 20, 21]]
    out = BatchDecoder(tiny_llama, "lowbit", num_tokens=4, drafter_kwargs={"backend": "torch-int8"}).generate(
        prompts, max_new_tokens=16)
    assert [r.token_ids for r in out.rows] == [_alone(tiny_llama, p, 16).token_ids for p in prompts]
    assert [t for t, _ in handed] == [p[:-1] for p in prompts]
    for (tokens, keys), p in zip(handed, prompts):
        session = SelfSpecDecoder(tiny_llama, None).start(p, max_new_tokens=2)
        assert torch.equal(keys, session.cache.layers[0].keys[0, :, : len(p) - 1])
    assert prompts[0][:-1] not in fed and prompts[2][:-1] not in fed  # no row's prompt went through the draft


class _Wrong(Drafter):
    """Proposes a chain no row ever accepts (each token one past the last): a step drafted with it commits one
    token a row."""

    name = "always-wrong"

    def propose(self, tokens, max_tokens):
        return [(tokens[-1] + 1 + i) % 50 for i in range(max_tokens)]


def test_with_several_drafters_each_step_drafts_with_the_one_chosen_and_rows_stay_plain(tiny_llama):
    batch, max_new = [[5, 9, 14, 7, 9, 14], [6, 6, 8, 11, 6, 8, 11]], 14
    alone = [_alone(tiny_llama, p, max_new) for p in batch]
    _NearOracle.reference = {tuple(p): a.token_ids + [0] * 20 for p, a in zip(batch, alone)}
    decoder = BatchDecoder(tiny_llama, [(_NearOracle, {}), (_Wrong, {})], num_tokens="auto", compact_min=0, compact_share=0)
    session = decoder.start(batch, max_new_tokens=max_new)
    oracle, _ = session.step(4, 0)
    wrong, _ = session.step(4, 1)
    assert oracle > len(batch) and wrong == len(batch)  # the near-oracle's chains are kept in part, the wrong ones never
    with pytest.raises(SettingsError, match="out of range"):
        session.step(4, 2)
    out = decoder.generate(batch, max_new_tokens=max_new)  # the bandit over (drafter, cap) arms
    assert [r.token_ids for r in out.rows] == [a.token_ids for a in alone]
    assert set(out.drafters) == {0, 1} and len(out.drafters) == len(out.caps) == out.steps


def test_a_row_count_met_for_the_first_time_starts_from_the_closest_ones_means(tiny_llama):
    decoder = BatchDecoder(tiny_llama, "suffix", num_tokens="auto", caps=(0, 2, 4))
    four = decoder.policy(4)
    for cap, goodput in ((0, 10.0), (2, 14.0), (4, 12.0), (2, 16.0)):
        four.update(cap, committed=goodput, seconds=1.0)
    three = decoder.policy(3)
    assert three is not four and three.means() == four.means() and three.counts == [1, 1, 1]
    assert decoder.policy(3) is three


def test_the_bandit_is_rewarded_per_row_so_row_counts_compare(tiny_llama, monkeypatch):
    """Plain steps commit one token a row whatever the rows in the batch: the reward each policy gets says so (a
    whole-batch reward halves when one of two rows leaves, and a policy seeded from the two-row one would read
    its own arms as worse than the seeded ones)."""
    from leap.core.policies.batch_caps import GoodputBandit

    seen = []
    monkeypatch.setattr(GoodputBandit, "update", lambda self, arm, committed, seconds, **screen: seen.append(committed))
    BatchDecoder(tiny_llama, "suffix", num_tokens="auto", caps=(0,)).generate([[5, 9, 14], [6, 8]], max_new_tokens=6)
    assert seen and all(c == 1.0 for c in seen)


@pytest.mark.parametrize("batch_bar", [True, False])
def test_each_batch_starts_by_measuring_its_own_bar(tiny_llama, monkeypatch, batch_bar):
    """With ``batch_bar`` (off by default) every batch makes its bandit's bar again before its first step - three plain
    steps, however well drafting did in the batch before (leap.core.policies.batch_bar) - and off it makes none. Red
    when the decoder does not begin a batch's bar (the second batch's first row count is not made again) or does not
    pass the flag on."""
    from leap.core.policies.batch_caps import GoodputBandit

    made = []
    rebar = GoodputBandit.rebar
    monkeypatch.setattr(GoodputBandit, "rebar", lambda self, seconds=None: (made.append(seconds), rebar(self, seconds)))
    batch = [[5, 9, 14, 5, 9], [6, 8, 6, 8, 11]]
    alone = [_alone(tiny_llama, p, 10) for p in batch]
    _NearOracle.reference = {tuple(p): a.token_ids + [0] * 20 for p, a in zip(batch, alone)}
    decoder = BatchDecoder(tiny_llama, _NearOracle, num_tokens="auto", caps=(0, 2), refresh=0, batch_bar=batch_bar)
    for _ in range(2):
        before = len(made)
        out = decoder.generate(batch, max_new_tokens=10)
        assert [row.token_ids for row in out.rows] == [a.token_ids for a in alone]
        if batch_bar:
            assert made[before] is None and out.caps[:3] == [0, 0, 0]  # measured in this batch, first
        else:
            assert len(made) == before == 0


@pytest.mark.parametrize("lead, made", [(1.5, False), (1.05, True)])
def test_a_bar_margin_asks_the_tally_of_the_drafters_in_play(tiny_llama, monkeypatch, lead, made):
    """``batch_bar=0.2``: before each batch the decoder hands its bar the tally's all-in speedup of the drafters not
    retired; a run led by more than a fifth keeps its bar, one within it makes it again. Red when the decoder hands
    over nothing (every batch made again), the retired drafters' steps, or the run's tally whole."""
    from leap.core.policies.batch_caps import GoodputBandit
    from leap.core.policies.loss_budget import DraftingTally

    asked, made_now = [], []
    monkeypatch.setattr(DraftingTally, "speedup_among", lambda self, drafters: (asked.append(set(drafters)), lead)[1])
    rebar = GoodputBandit.rebar
    monkeypatch.setattr(GoodputBandit, "rebar", lambda self, s=None: (made_now.append(s), rebar(self, s)))
    decoder = BatchDecoder(tiny_llama, [("suffix", {}), ("prompt-lookup", {})], num_tokens="auto", caps=(0, 2),
                           batch_bar=0.2)
    decoder.retire({1})
    decoder.generate([[5, 9, 14, 5, 9], [6, 8, 6, 8, 11]], max_new_tokens=6)
    assert asked == [{0}] and bool(made_now) is made


def test_each_step_records_its_drafting_seconds_and_verification_width(tiny_llama):
    """``step_width``: the tokens a row each step verified - 1 for a plain step, 1 + the longest row's chain for a
    drafting one (the near-oracle proposes the whole cap while a row has room) - and ``step_draft_s`` the drafting
    seconds inside ``step_s``. Red when the width is the cap rather than the chains, or a plain step is counted as
    drafting."""
    batch = [[5, 9, 14, 5, 9], [6, 8, 6, 8, 11]]
    alone = [_alone(tiny_llama, p, 12) for p in batch]
    _NearOracle.reference = {tuple(p): a.token_ids + [0] * 20 for p, a in zip(batch, alone)}
    session = BatchDecoder(tiny_llama, _NearOracle, num_tokens=4).start(batch, max_new_tokens=12)
    for cap in (0, 3, 0, 2):
        session.step(cap)
    out = session.outcome()
    assert out.step_width == [1, 4, 1, 3]
    assert all(0 <= d <= s for d, s in zip(out.step_draft_s, out.step_s)) and len(out.step_draft_s) == out.steps
    while not session.done:
        session.step(6)  # the rows' room runs out: the chains shorten below the cap
    out = session.outcome()
    assert 1 < out.step_width[-1] < 7  # the last rows' room, not the cap


class _OneRowOracle(_NearOracle):
    """Right in the rows whose prompt is in :attr:`reference`, wrong (never accepted) in the others."""

    name = "one-row-oracle"

    def propose(self, tokens, max_tokens):
        done = len(tokens) - len(self.prompt)
        ref = self.reference.get(self.prompt)
        return list(ref[done: done + max_tokens]) if ref else [0] * max_tokens


def test_a_steps_progress_is_how_far_it_moved_the_batchs_laggard(tiny_llama, monkeypatch):
    """``step_progress``: per step, the fewest tokens any row it stepped had committed, after it less before it
    (recomputed here from the rows' own per-step tokens); a drafter right in one row only commits tokens a row
    above one a step but moves the batch on by one, as a plain step does. ``reward="progress"`` tells the bandit
    and the tally that, ``"mean"`` the tokens a row. Red when progress is the mean, the rows after rather than
    before are compared, or a reward reads the other."""
    from leap.core.policies.batch_caps import GoodputBandit

    batch, max_new = [[5, 9, 14, 7], [6, 6, 8, 11, 6], [7, 3, 9]], 24
    alone = [_alone(tiny_llama, p, max_new).token_ids for p in batch]
    _OneRowOracle.reference = {tuple(batch[0]): alone[0] + [0] * 20}
    update = GoodputBandit.update
    for reward in ("mean", "progress"):
        seen = []
        monkeypatch.setattr(GoodputBandit, "update", lambda self, arm, gain, seconds, **kw: (
            seen.append((arm, gain)), update(self, arm, gain, seconds, **kw))[1])
        decoder = BatchDecoder(tiny_llama, _OneRowOracle, num_tokens="auto", caps=(0, 4), reward=reward, screen=False)
        out = decoder.generate(batch, max_new_tokens=max_new)
        assert [r.token_ids for r in out.rows] == alone
        per_row = [r.accepted_lengths for r in out.rows]  # each row's tokens a step, over the steps it was in
        for t, moved in enumerate(out.step_progress):
            rows = [r for r, steps in enumerate(per_row) if len(steps) > t]
            assert moved == min(sum(per_row[r][:t + 1]) for r in rows) - min(sum(per_row[r][:t]) for r in rows)
        drafting = [t for t, cap in enumerate(out.caps)  # row 0 still in, with room for a draft
                    if cap and len(per_row[0]) > t and sum(per_row[0][:t]) < max_new - 1]
        assert drafting and all(out.step_committed[t] > out.step_rows[t] for t in drafting)  # row 0 ran ahead
        assert all(out.step_progress[t] == 1 for t in drafting)  # ... the laggards one token a step
        expected = [p if reward == "progress" else c / n
                    for p, c, n in zip(out.step_progress, out.step_committed, out.step_rows)]
        assert [g for _, g in seen] == pytest.approx(expected)
        rates = {n: decoder.plain_rate(n) for n in set(out.step_rows)}
        plain_s = sum((p if reward == "progress" else c / n) / rates[n] for cap, n, c, p in zip(
            out.caps, out.step_rows, out.step_committed, out.step_progress) if cap and rates[n])
        assert decoder.tally.plain_s == pytest.approx(plain_s) and plain_s > 0


def _slowest_worth(out, prior):
    """Each step's worth under ``reward="slowest"``, recomputed from the rows' own per-step tokens: a drafting step's
    tokens a row times the least of the still-decoding rows' rates under its drafter so far (each shrunk toward that
    drafter's mean over its rows by ``prior`` pseudo-steps), over that mean, at most 1."""
    per_row = [r.accepted_lengths for r in out.rows]
    seen: dict[int, dict[int, list[int]]] = {}
    worth = []
    for t, (cap, drafter, n, c) in enumerate(zip(out.caps, out.drafters, out.step_rows, out.step_committed)):
        share = 1.0
        if cap:
            mine = seen.setdefault(drafter, {})
            for r, steps in enumerate(per_row):
                if len(steps) > t:
                    mine.setdefault(r, [0, 0])
                    mine[r][0] += steps[t]
                    mine[r][1] += 1
            mean = sum(v[0] for v in mine.values()) / sum(v[1] for v in mine.values())
            still = [mine[r] for r, steps in enumerate(per_row) if len(steps) > t + 1]
            if still:
                share = min(1.0, min((k + prior * mean) / (m + prior) for k, m in still) / mean)
        worth.append(c / n * share)
    return worth


def test_a_drafting_step_is_worth_as_much_as_the_slowest_row_gains(tiny_llama, monkeypatch):
    """``reward="slowest"``: a batch without refills ends with its last row, so a drafter right in one row of three
    (that row runs ahead, the others commit one token a step) is worth ever less than its tokens a row as its steps
    show the others do not gain, towards one token a row; where every row gains alike it is worth its tokens a row.
    The bandit, the tally and the record's ``step_worth`` read the same numbers (recomputed from the rows' own
    tokens). Red when the rows' rates are not shrunk, finished rows count, or the share is the mean's."""
    from leap.core.decoding.batch_session import BatchSession
    from leap.core.policies.batch_caps import GoodputBandit

    batch, max_new = [[5, 9, 14, 7], [6, 6, 8, 11, 6], [7, 3, 9]], 24
    alone = [_alone(tiny_llama, p, max_new).token_ids for p in batch]
    _OneRowOracle.reference = {tuple(batch[0]): alone[0] + [0] * 20}
    update, seen = GoodputBandit.update, []
    monkeypatch.setattr(GoodputBandit, "update", lambda self, arm, gain, seconds, **kw: (
        seen.append(gain), update(self, arm, gain, seconds, **kw))[1])
    decoder = BatchDecoder(tiny_llama, _OneRowOracle, num_tokens=4, reward="slowest")
    out = decoder.generate(batch, max_new_tokens=max_new)
    assert [r.token_ids for r in out.rows] == alone
    expected = _slowest_worth(out, BatchSession.SLOWEST_PRIOR_STEPS)
    assert out.step_worth == pytest.approx(expected)
    ahead = [t for t, (c, n) in enumerate(zip(out.step_committed, out.step_rows)) if c > n and n > 1]
    assert len(ahead) >= 3 and all(out.step_worth[t] < out.step_committed[t] / out.step_rows[t] for t in ahead)
    assert out.step_worth[ahead[-1]] / (out.step_committed[ahead[-1]] / out.step_rows[ahead[-1]]) < \
        out.step_worth[ahead[0]] / (out.step_committed[ahead[0]] / out.step_rows[ahead[0]])  # ever less
    auto = BatchDecoder(tiny_llama, _OneRowOracle, num_tokens="auto", caps=(0, 4), reward="slowest", screen=False)
    out = auto.generate(batch, max_new_tokens=max_new)
    assert seen == pytest.approx(out.step_worth) and out.step_worth == pytest.approx(
        _slowest_worth(out, BatchSession.SLOWEST_PRIOR_STEPS))
    rates = {n: auto.plain_rate(n) for n in set(out.step_rows)}
    assert auto.tally.plain_s == pytest.approx(sum(w / rates[n] for cap, n, w in zip(
        out.caps, out.step_rows, out.step_worth) if cap and rates[n]))
    _NearOracle.reference = {tuple(p): a + [0] * 20 for p, a in zip(batch, alone)}  # every row alike: its mean
    same = [[5, 9, 14, 7]] * 3
    out = BatchDecoder(tiny_llama, _NearOracle, num_tokens=4, reward="slowest").generate(same, max_new_tokens=max_new)
    assert out.step_worth == pytest.approx([c / n for c, n in zip(out.step_committed, out.step_rows)])


class _SlowWrong(_Wrong):
    """Never accepted, and ``delay`` (20 ms) a draft: a drafted step always costs more than a plain one for the same
    tokens."""

    name = "slow-wrong"
    delay = 0.02

    def propose(self, tokens, max_tokens):
        import time

        time.sleep(self.delay)
        return super().propose(tokens, max_tokens)


def test_a_batch_that_loses_stops_drafting_and_the_next_ones_skip_as_a_search_does(tiny_llama):
    batch, max_new = [[5, 9, 14, 7], [6, 6, 8, 11, 6]], 40  # 3% of 40 steps: more than one step's loss
    decoder = BatchDecoder(tiny_llama, [(_SlowWrong, {}), (_Wrong, {})], num_tokens="auto", caps=(0, 4),
                           loss_budget=0.03)
    first = decoder.generate(batch, max_new_tokens=max_new)
    assert any(first.caps) and first.caps[-3:] == [0, 0, 0]  # it drafted, lost its budget, decoded plainly
    assert decoder.generate(batch, max_new_tokens=max_new).caps == [0] * max_new  # skipped: no draft at all
    assert any(decoder.generate(batch, max_new_tokens=max_new).caps)  # then tried again
    alone = [_alone(tiny_llama, p, max_new).token_ids for p in batch]
    assert [r.token_ids for r in first.rows] == alone
    with pytest.raises(SettingsError, match="loss_budget"):
        BatchDecoder(tiny_llama, "suffix", num_tokens=4, loss_budget=0.03)
    warmed = BatchDecoder(tiny_llama, [(_SlowWrong, {}), (_Wrong, {})], num_tokens="auto", caps=(0, 4),
                          loss_budget=0.03)
    short = warmed.generate(batch, max_new_tokens=16)  # a warm-up: its budget (0.48 of a step's loss) is not judged
    assert any(short.caps) and short.caps[-1] == 0  # it tripped ...
    assert any(warmed.generate(batch, max_new_tokens=max_new).caps)  # ... and the long batch after it still drafts


class _SlowerWrong(_SlowWrong):
    """Never accepted, and 100 ms a draft."""

    name = "slower-wrong"
    delay = 0.1


class _Oracle(_NearOracle):
    """Always right: proposes its row's plain output (the test fills :attr:`reference`)."""

    name = "oracle"

    def propose(self, tokens, max_tokens):
        done = len(tokens) - len(self.prompt)
        return list(self.reference[self.prompt][done: done + max_tokens])


def test_once_a_drafter_pays_the_loss_budget_stops_and_no_batch_is_skipped(tiny_llama):
    """The loss budget is what a search may lose before something pays: a drafter that loses, explored after one that
    paid, must not switch the batch to plain decoding, nor the next batch off."""
    batch, max_new = [[5, 9, 14, 7], [6, 6, 8, 11, 6]], 40
    alone = [_alone(tiny_llama, p, max_new).token_ids for p in batch]
    _Oracle.reference = {tuple(p): a + [0] * 20 for p, a in zip(batch, alone)}
    # 20% of 40 plain steps (~10 ms here): the slower drafter's 100 ms spend it, an oracle step never could
    decoder = BatchDecoder(tiny_llama, [(_Oracle, {}), (_SlowerWrong, {})], num_tokens="auto", caps=(0, 4),
                           loss_budget=0.2, screen=False)
    first = decoder.generate(batch, max_new_tokens=max_new)
    assert [r.token_ids for r in first.rows] == alone
    explored = first.drafters.index(1)  # the losing drafter's step, after the oracle's
    assert first.caps[explored] == 4 and any(first.caps[explored + 1:])  # and still drafting after it
    assert any(decoder.generate(batch, max_new_tokens=max_new).caps)  # the next batch is not skipped


class _KeepsContext(_Oracle):
    """Always right, and keeps a context of its own (as lowbit's llama.cpp cache): under ``first_step_setup="switch"``
    its first step after a step it did not draft is a switch, its catching up."""

    name = "keeps-context"
    keeps_context = True


def _steady_clock(monkeypatch, plain_s: float = 0.01, per_draft_token: float = 0.2):
    """Every batch step takes ``plain_s`` seconds, and ``per_draft_token`` of that more for each draft token of its
    cap (a cap-2 step: 1.4 plain steps), its drafter's setup none: a drafter right on every token pays (three tokens
    a row for 1.4 steps), one never right loses (one for 1.4). The step's record carries the same seconds."""
    from leap.core.decoding.batch_session import BatchSession

    step = BatchSession.step

    def steady(self, cap, drafter=0):
        committed, _ = step(self, cap, drafter)
        seconds = plain_s * (1.0 + per_draft_token * int(cap))
        self.begin_s = 0.0
        self.steps[-1] = (self.steps[-1][0], committed, seconds, *self.steps[-1][3:])
        return committed, seconds

    monkeypatch.setattr(BatchSession, "step", steady)


def _budget_sees(decoder, batch, max_new, monkeypatch):
    """Decode ``batch``; what the loss budget was told (each step's ``pays``), the outcome, and which drafting steps
    were the context-keeping drafter's switches and which its first in the batch.

    The caller sets each step's seconds first (:func:`_steady_clock`): whether the oracle pays is the test's premise,
    and on the tiny model a wall-clock step is mostly Python, so a busy machine could make one fast plain step
    outrun every drafting step after it (it did once in CI: the bandit never said the oracle paid)."""
    from leap.core.policies.loss_budget import LossBudget

    told, step = [], LossBudget.step
    monkeypatch.setattr(LossBudget, "step", lambda self, seconds, committed, rate, pays: (
        told.append(pays), step(self, seconds, committed, rate, pays))[1])
    out = decoder.generate(batch, max_new_tokens=max_new)
    switches, previous = [], None
    for drafter, cap in zip(out.drafters, out.caps):
        switches.append(bool(cap) and drafter == 0 and previous != 0)
        previous = drafter if cap else None
    return told, out, sum(switches)


def test_once_the_runs_drafting_has_lost_all_in_the_budget_runs_whatever_the_bandit_says(tiny_llama, monkeypatch):
    """``judge_all_in``: while the decoder's tally says the drafters in play, every cost counted, lost to plain steps,
    the bandit's word that an arm pays is not taken - the loss budget is told nothing pays - and a switch's catching up
    counts in it (its first step in the batch, rows begun and prompts taken in, still does not); otherwise the bandit's
    word stands and switches are left out. Red when the tally is not read, its word not passed on, switches left out
    with the tally lost, the first step counted, or a retired drafter's loss held against those in play."""
    batch, max_new = [[5, 9, 14, 7], [6, 6, 8, 11, 6]], 30
    alone = [_alone(tiny_llama, p, max_new).token_ids for p in batch]
    _Oracle.reference = {tuple(p): a + [0] * 40 for p, a in zip(batch, alone)}
    _steady_clock(monkeypatch)

    def decoder(**kwargs):  # a budget of ten batches' plain time: never spent, every step told
        return BatchDecoder(tiny_llama, [(_KeepsContext, {}), (_Wrong, {})], num_tokens="auto", caps=(0, 2),
                            loss_budget=10.0, first_step_setup="switch", screen=False, **kwargs)

    trusted = decoder()
    told, out, switches = _budget_sees(trusted, batch, max_new, monkeypatch)
    assert [r.token_ids for r in out.rows] == alone
    assert any(told) and len(told) == out.steps - switches  # the oracle pays by the bandit; switches left out
    assert trusted.tally.plain_s > 0 and not trusted.tally.lost  # and all in: always right, never slow

    for judged in (True, False):
        lost = decoder(judge_all_in=judged)
        lost.tally.by_drafter[0] = [2.0, 1.0]  # the run so far: the oracle's drafting took twice plain's time
        told, out, switches = _budget_sees(lost, batch, max_new, monkeypatch)
        assert [r.token_ids for r in out.rows] == alone
        assert switches > 1  # the oracle drafted again after other steps: switches to count or leave out
        if judged:
            assert not any(told) and len(told) == out.steps - 1  # all but the oracle's first step, told none pays
        else:
            assert any(told) and len(told) == out.steps - switches

    retired_lost = decoder(judge_all_in=True)  # the loss is a retired drafter's (the first batch's elimination)
    retired_lost.tally.by_drafter[1] = [9.0, 1.0]
    retired_lost.retire({1})
    told, out, switches = _budget_sees(retired_lost, batch, max_new, monkeypatch)
    assert [r.token_ids for r in out.rows] == alone
    assert any(told) and len(told) == out.steps - switches  # drafting in play has not lost: the bandit's word



def _tally_steps(tally, drafter, steps):
    """Give ``tally`` ``drafter``'s counted steps, ``(seconds, plain seconds for their tokens)`` each."""
    tally.by_drafter[drafter] = [sum(s for s, _ in steps), sum(g for _, g in steps)]
    tally.moments[drafter] = [len(steps), sum(s * s for s, _ in steps), sum(g * g for _, g in steps),
                              sum(s * g for s, g in steps)]


def test_judged_beyond_noise_the_bandits_word_waits_until_drafting_has_paid_surely(tiny_llama, monkeypatch):
    """``judge_all_in=0.95``: a tally whose point estimate says the drafters in play paid (1.05) but not beyond the
    noise of its ten steps is not taken as paid - the budget is told nothing pays, as for a tally that lost - while
    ``judge_all_in=True`` takes the point estimate; a tally surely above plain decoding (1.5, steady) leaves the
    bandit's word standing, and a confidence outside (0, 1) is refused. Red when the decoder passes no confidence on,
    or reads the point estimate for it."""
    batch, max_new = [[5, 9, 14, 7], [6, 6, 8, 11, 6]], 30
    alone = [_alone(tiny_llama, p, max_new).token_ids for p in batch]
    _Oracle.reference = {tuple(p): a + [0] * 40 for p, a in zip(batch, alone)}
    _steady_clock(monkeypatch)
    noisy = [(0.1, 0.05), (0.1, 0.16)] * 5  # 1.05 of plain decoding, give or take 0.18
    for judged, steps, trusted in ((True, noisy, True), (0.95, noisy, False), (0.95, [(0.1, 0.15)] * 10, True)):
        decoder = BatchDecoder(tiny_llama, [(_KeepsContext, {}), (_Wrong, {})], num_tokens="auto", caps=(0, 2),
                               loss_budget=10.0, first_step_setup="switch", screen=False, judge_all_in=judged)
        _tally_steps(decoder.tally, 0, steps)
        told, out, switches = _budget_sees(decoder, batch, max_new, monkeypatch)
        assert [r.token_ids for r in out.rows] == alone
        assert any(told) == trusted and len(told) == (out.steps - switches if trusted else out.steps - 1)
    with pytest.raises(SettingsError, match="judge_all_in"):
        BatchDecoder(tiny_llama, "prompt-lookup", num_tokens="auto", judge_all_in=1.5)

class _Counted(_Wrong):
    """Counts the rows begun on a prompt (class-wide)."""

    name = "counted"
    begun = 0

    def begin(self, prompt):
        type(self).begun += 1


def test_with_several_drafters_a_batch_begins_only_the_drafters_it_drafts_with(tiny_llama, monkeypatch):
    """A drafter's rows cost something to begin (lowbit: every row's KV handoff): a batch that never drafts with one
    never begins it, and one that does begins each of its rows once."""
    monkeypatch.setattr(_Counted, "begun", 0)
    batch = [[5, 9, 14, 7], [6, 6, 8, 11, 6]]
    decoder = BatchDecoder(tiny_llama, [(_Wrong, {}), (_Counted, {})], num_tokens="auto")
    session = decoder.start(batch, max_new_tokens=6)
    session.step(2, 0)
    session.step(0, 1)  # a plain step: no drafter runs
    assert _Counted.begun == 0 and session.drafter_sets[1] is None
    session.step(2, 1)
    session.step(2, 1)
    assert _Counted.begun == len(batch)


class _SlowBegin(_NearOracle):
    """A drafter that is always right (it proposes the plain output) and whose rows take 0.3 s to begin (a llama.cpp
    context, a prompt taken in)."""

    name = "slow-begin"

    def begin(self, prompt):
        import time

        time.sleep(0.3 / 2)  # two rows below
        super().begin(prompt)

    def propose(self, tokens, max_tokens):
        done = len(tokens) - len(self.prompt)
        return list(self.reference[self.prompt][done: done + max_tokens])


def test_the_bandit_judges_a_drafters_steps_without_the_one_time_cost_of_beginning_its_rows(tiny_llama, monkeypatch):
    """Beginning a drafter's rows is paid once a batch, in its first step with it: the step's wall time includes it
    (the batch's clock does), the bandit's reward does not - otherwise that first step alone decided that the drafter
    loses (on the default model: lowbit's first step at B = 4 took 0.51 s against 0.14 s for the next ones,
    experiments/2026-11-26-batch-first-steps/batch_first_steps.py)."""
    from leap.core.policies.batch_caps import GoodputBandit

    batch, max_new = [[5, 9, 14, 7, 9, 14], [6, 6, 8, 11, 6, 8, 11]], 10
    _NearOracle.reference = {tuple(p): _alone(tiny_llama, p, max_new).token_ids + [0] * 20 for p in batch}
    seen = []
    update = GoodputBandit.update
    monkeypatch.setattr(GoodputBandit, "update",
                        lambda self, arm, committed, seconds, **screen: (seen.append((arm, seconds)),
                                                                          update(self, arm, committed, seconds)))
    session = BatchDecoder(tiny_llama, [(_Wrong, {}), (_SlowBegin, {})], num_tokens="auto").start(batch, max_new_tokens=max_new)
    _, wall = session.step(2, 1)
    assert wall >= 0.3 and session.begin_s >= 0.3 and wall - session.begin_s < 0.25
    BatchDecoder(tiny_llama, [(_Wrong, {}), (_SlowBegin, {})], num_tokens="auto", caps=(0, 2)).generate(
        batch, max_new_tokens=max_new)
    first = next(s for arm, s in seen if arm == (1, 2))
    assert first < 0.25  # the begin is not in the arm's reward


def test_cascade_rows_left_to_lowbit_draft_together_and_stay_lossless(tiny_llama, monkeypatch):
    """``cascade``'s rows in a batch: where the model-free part has no long draft, the low-bit parts of all such rows
    draft in one :meth:`LowBit.propose_rows` (one pass per depth) instead of one row after another, and every row is
    its prompt decoded alone."""
    from leap.core.drafters.lowbit import LowBit

    together = []
    propose_rows = LowBit.propose_rows.__func__
    monkeypatch.setattr(LowBit, "propose_rows", classmethod(
        lambda cls, rows, tokens, max_tokens: (together.append(len(rows)), propose_rows(cls, rows, tokens, max_tokens))[1]))
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17, 18, 19, 20, 21]]
    out = BatchDecoder(tiny_llama, "cascade", num_tokens=4, drafter_kwargs={"then_backend": "torch-int8"}).generate(
        prompts, max_new_tokens=12)
    assert [r.token_ids for r in out.rows] == [_alone(tiny_llama, p, 12).token_ids for p in prompts]
    assert together and max(together) == len(prompts)  # the rows drafted together, not one by one


@pytest.mark.parametrize("spec", ["lowbit", "cascade"])
def test_sampled_lowbit_rows_draft_together(tiny_llama, monkeypatch, spec):
    """At T > 0 the rows' low-bit draws come from one :meth:`LowBit.propose_sampled_rows` a step (one runner pass a
    depth for every row), for ``lowbit`` and for ``cascade``'s rows left to it, not one row's drafter after another.
    (That each row draws what it would alone is the drafter's test; that sampled rows keep the target distribution
    is ``test_sampled_rows_follow_the_target_distribution...``.)"""
    from leap.core.drafters.lowbit import LowBit

    together = []
    rows_of = LowBit.propose_sampled_rows.__func__
    monkeypatch.setattr(LowBit, "propose_sampled_rows", classmethod(
        lambda cls, rows, *args: (together.append(len(rows)), rows_of(cls, rows, *args))[1]))
    monkeypatch.setattr(LowBit, "propose_sampled", lambda *a, **k: pytest.fail("a row drafted alone"))
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17, 18, 19, 20, 21]]
    kwargs = {"backend": "torch-int8"} if spec == "lowbit" else {"then_backend": "torch-int8", "min_first": 99}
    out = BatchDecoder(tiny_llama, spec, num_tokens=4, drafter_kwargs=kwargs).generate(
        prompts, max_new_tokens=12, temperature=1.0, seed=3)
    assert all(r.token_ids for r in out.rows) and sum(1 for c in out.caps if c) >= 2  # it decoded, drafting
    assert together and max(together) == len(prompts)


def test_the_loss_budget_does_not_count_beginning_a_drafters_rows_as_a_loss(tiny_llama):
    """Losing cheaply judges the drafted steps against plain ones; beginning a drafter's rows (0.3 s here, far above
    this batch's budget) is paid once a batch, as the prefill is, and must not switch off a drafter that pays."""
    batch, max_new = [[5, 9, 14, 7, 9, 14], [6, 6, 8, 11, 6, 8, 11]], 14
    alone = [_alone(tiny_llama, p, max_new).token_ids for p in batch]
    _NearOracle.reference = {tuple(p): a + [0] * 20 for p, a in zip(batch, alone)}
    # a generous budget (half the batch's plain time: tens of ms on this tiny model) that timing noise cannot spend,
    # and still far below the begin's 0.3 s
    # (two drafters: a batch begins a drafter's rows at its first step with it, inside that step)
    decoder = BatchDecoder(tiny_llama, [(_SlowBegin, {}), (_Wrong, {})], num_tokens="auto", caps=(0, 2),
                           loss_budget=0.5)
    out = decoder.generate(batch, max_new_tokens=max_new)
    assert [r.token_ids for r in out.rows] == alone
    # still drafting after the begin: the budget was not spent by it (which drafter the bandit then prefers is its own
    # business, and rests on one timed step: on this project's VM the first ~10 ms of work after a pause run several
    # times slower, so a one-pull comparison of drafters is not this test's to make)
    assert sum(1 for c in out.caps if c) > 1


def test_the_bandit_screens_caps_with_this_batch_sizes_calibrated_costs_and_the_rows_accepted_drafts(tiny_llama,
                                                                                                      monkeypatch):
    """With ``screen`` (the default under ``num_tokens="auto"``) each row count's bandit reads verification's cost at
    that many rows from calibration (:meth:`~leap.core.runtime.costs.Calibration.verify_rows`), and every step tells
    it the draft tokens the rows accepted (a row's mean) and the seconds spent drafting; ``screen=False`` is the ladder
    alone."""
    from leap.core.decoding import calibrate as calibrate_module
    from leap.core.policies.batch_caps import GoodputBandit
    from tests.costs import fake_costs

    costs = fake_costs()
    costs.batch_curves = {b: {q: b * (1.0 + 0.1 * (q - 1)) for q in (1, 2, 3, 5)} for b in (2, 4, 8)}
    monkeypatch.setattr(calibrate_module, "batch_calibration_for", lambda model, sizes: costs)
    batch, max_new = [[5, 9, 14, 7, 9, 14], [6, 6, 8, 11, 6, 8, 11]], 10
    _NearOracle.reference = {tuple(p): _alone(tiny_llama, p, max_new).token_ids + [0] * 20 for p in batch}
    seen = []
    update = GoodputBandit.update
    monkeypatch.setattr(GoodputBandit, "update", lambda self, arm, committed, seconds, **screen: (
        seen.append((arm, screen)), update(self, arm, committed, seconds, **screen)))
    decoder = BatchDecoder(tiny_llama, _SlowBegin, num_tokens="auto", caps=(0, 2))
    out = decoder.generate(batch, max_new_tokens=max_new)
    assert [r.token_ids for r in out.rows] == [_alone(tiny_llama, p, max_new).token_ids for p in batch]
    assert decoder.policy(2).verify_cost(3) == pytest.approx(costs.verify_rows(2, 3)) == pytest.approx(2 * 1.2)
    drafted = [screen for arm, screen in seen if arm == 2]
    assert drafted and all(s["accepted"] == 2.0 and s["draft_s"] > 0 for s in drafted[:1])  # always right: 2 a row
    assert all(s["accepted"] == 0 for arm, s in seen if arm == 0)
    assert BatchDecoder(tiny_llama, _SlowBegin, num_tokens="auto", screen=False).policy(2).verify_cost is None


layer_configs = st.text(alphabet="ESR", min_size=6, max_size=6)  # execute, skip, repeat for each of the 6 layers


@given(batch=prompts, config=layer_configs, cap=st.integers(0, 6), max_new=st.integers(1, 14))
def test_every_row_is_plain_decoding_of_its_prompt_alone_with_leaps_layer_draft(tiny_any, batch, config, cap, max_new):
    """LEAP's layer draft in a batch (issue 37: layer drafts batched): whatever the configuration, rows and caps, each row
    is its prompt decoded alone - the draft's cache entries never reach verification."""
    alone = [_alone(tiny_any, p, max_new) for p in batch]
    out = BatchDecoder(tiny_any, layer_config=LayerConfig.parse(config), num_tokens=cap, compact_min=0,
                       compact_share=0).generate(batch, max_new_tokens=max_new)
    for p, row, ref in zip(batch, out.rows, alone):
        assert same_or_float_tie(tiny_any, p, row.token_ids, ref.token_ids), (row.token_ids, ref.token_ids)
        assert row.token_ids != ref.token_ids or row.stop_reason == ref.stop_reason


@pytest.mark.parametrize("config", ["EEEEEE", "ESEEEE", "EEERER", "ESSREE"])
def test_a_rows_layer_draft_is_the_single_requests_draft(tiny_llama, config):
    """Row by row, the batched layer draft proposes what the single-request decoder's draft of the same configuration
    proposes: the same tokens accepted at every step as a single request with chains of 4 (every layer executed: the
    draft is the model, every chain accepted whole) - its attention sees the row's committed slots and its own earlier
    draft tokens, no hole and no other row's."""
    cfg = LayerConfig.parse(config)
    batch = [[5, 9, 14, 7, 9, 14, 3, 3, 8], [6, 8], [11, 4, 4, 9, 2, 7]]
    out = BatchDecoder(tiny_llama, layer_config=cfg, num_tokens=4, compact_min=0, compact_share=0).generate(
        batch, max_new_tokens=16)
    for p, row in zip(batch, out.rows):
        single = SelfSpecDecoder(tiny_llama, cfg, "fixed", policy_kwargs={"k": 4}).generate(p, max_new_tokens=16)
        assert row.token_ids == single.token_ids
        assert row.accepted_lengths == [s.committed for s in single.steps]
    if config == "EEEEEE":
        assert all(n == 5 for row in out.rows for n in row.accepted_lengths[:-1])


def test_layer_drafts_in_a_batch_sample_the_target_distribution(monkeypatch):
    """T = 1 with the layer draft (its exact draft distribution in the rule), per row, and the accept-all negative
    control fails the same test."""
    model = tiny_model("llama", vocab=12, eos_token_id=None, init=0.3)
    settings = SamplingSettings(1.0, 1.0)
    prompts = [[4, 7, 4, 7, 4], [9, 2]]
    exact = {tuple(p): _exact_two_token_distribution(model, p, settings) for p in prompts}
    cfg = LayerConfig.parse("ESEESE")
    counts = _sample_rows(model, prompts, 1000, layer_config=cfg)
    for p, c in zip(prompts, counts):
        assert _chi2_pvalue(c, exact[tuple(p)]) > 1e-3
    wrong = _sample_rows(model, prompts, NEGATIVE_N, monkeypatch, accept_all=True, layer_config=cfg)
    assert min(_chi2_pvalue(w, exact[tuple(p)]) for p, w in zip(prompts, wrong)) < 1e-6


def test_a_batch_refuses_a_layer_configuration_it_cannot_run(tiny_llama):
    with pytest.raises(SettingsError, match="not both"):
        BatchDecoder(tiny_llama, "suffix", layer_config=LayerConfig.parse("ESEEEE"))
    with pytest.raises(SettingsError, match="6"):
        BatchDecoder(tiny_llama, layer_config=LayerConfig.parse("ESEE"))
    with pytest.raises(SettingsError, match="low"):
        BatchDecoder(tiny_llama, layer_config=LayerConfig.parse("skip=1;low=2", 6))


def test_a_first_batched_use_measures_its_batch_costs_before_the_batch_starts(tiny_llama, monkeypatch):
    """With the screen, batched verification is calibrated on first use - before the session's clock starts (its
    prefill and row latencies), never inside the batch."""
    from leap.core.decoding import calibrate as calibrate_module
    from tests.costs import fake_costs

    costs = fake_costs()
    costs.batch_curves = {b: {q: float(b + q) for q in (1, 2, 3)} for b in (2, 4, 8)}
    order = []
    monkeypatch.setattr(calibrate_module, "batch_calibration_for", lambda model, sizes: (order.append("costs"), costs)[1])
    start = BatchDecoder.start
    monkeypatch.setattr(BatchDecoder, "start", lambda self, *a, **kw: (order.append("start"), start(self, *a, **kw))[1])
    BatchDecoder(tiny_llama, "suffix", num_tokens="auto", caps=(0, 2)).generate([[5, 9, 14], [6, 8]], max_new_tokens=4)
    assert order and order[0] == "costs" and order.index("start") > 0


def test_a_float32_tie_is_told_from_a_wrong_token(tiny_qwen2):
    """The helper the row tests use (tests/tiny.py): on the tiny Qwen2, [10, 9, 11, 11, 9, 7] decoded alone reaches two
    logits 1e-6 apart at its fifth token, which a batch's forward can order the other way; that departure passes, a
    wrong token where the best logit leads clearly does not, nor does a row that stops early."""
    prompt = [10, 9, 11, 11, 9, 7]
    ref = _alone(tiny_qwen2, prompt, 8).token_ids
    ids = torch.tensor([prompt + ref[:4]])
    with torch.inference_mode():
        top = torch.topk(tiny_qwen2.hf_model(input_ids=ids).logits[0, -1], 2)
    assert top.values[0] - top.values[1] < 1e-5 and ref[4] in top.indices.tolist()
    tied = ref[:4] + [int(t) for t in top.indices if int(t) != ref[4]] + ref[5:]
    assert same_or_float_tie(tiny_qwen2, prompt, tied, ref)
    wrong = ref[:1] + [(ref[1] + 1) % 97] + ref[2:]
    assert not same_or_float_tie(tiny_qwen2, prompt, wrong, ref)
    assert not same_or_float_tie(tiny_qwen2, prompt, ref[:5], ref)


def test_each_drafters_best_goodput_over_plain_is_read_from_the_bandit_of_that_row_count(tiny_llama):
    """What :class:`~leap.search.batch.BatchSearch` teaches its memory: per drafter, the best of its caps' goodput over
    the plain arm's (red when a drafter's first cap, or the plain arm's own value, is reported)."""
    decoder = BatchDecoder(tiny_llama, [("suffix", {}), ("prompt-lookup", {})], num_tokens="auto", caps=(0, 2, 4),
                           screen=False)
    assert decoder.goodput_over_plain(3) == {}  # no batch of 3 rows yet
    bandit = decoder.policy(3)
    assert decoder.goodput_over_plain(3) == {}  # no plain step measured yet
    for arm, tokens in (((0, 0), 2.0), ((0, 2), 3.0), ((0, 4), 5.0), ((1, 2), 1.0)):
        bandit.update(arm, committed=tokens, seconds=1.0)
    assert decoder.goodput_over_plain(3) == {0: 2.5, 1: 0.5}
    fixed = BatchDecoder(tiny_llama, "suffix", num_tokens=4)
    fixed.policy(2)
    assert fixed.goodput_over_plain(2) == {}  # a fixed cap: no bandit, nothing measured


def test_a_drafters_first_drafting_step_in_a_batch_is_its_setup_and_not_measured(tiny_llama, monkeypatch):
    """Beginning a drafter's rows, and what it defers to its first draft (lowbit takes the prompts in there), would
    make its first step in every batch look slow: the bandit learns from every drafting step but each drafter's first
    in the batch, and from every plain step (red when the first step is measured). With ``"switch"`` also not from a
    drafter's first step after a step it did not draft (where lowbit takes in what it missed)."""
    from leap.core.policies.batch_caps import GoodputBandit

    updates: list = []
    update = GoodputBandit.update

    def spy(self, cap, committed, seconds, **kw):
        updates.append(cap)
        return update(self, cap, committed, seconds, **kw)

    monkeypatch.setattr(GoodputBandit, "update", spy)
    decoder = BatchDecoder(tiny_llama, [("suffix", {}), ("prompt-lookup", {})], num_tokens="auto", caps=(0, 2),
                           screen=False, first_step_setup=True)  # off by default
    for first in (True, False):
        out = decoder.generate([[5, 9, 14, 20, 7, 11, 5, 9], [3, 8, 3, 8, 3, 8]], max_new_tokens=12)
        measured, begun = [], set()
        for d, c in zip(out.drafters, out.caps):
            if c and d not in begun:
                begun.add(d)  # its first drafting step in the batch: not measured
            else:
                measured.append((d if c else 0, c))
        # the first batch pulls every arm; the second may decode plainly throughout (the bandit's timing, tiny model)
        assert (begun or not first) and [tuple(a) for a in updates] == measured
        updates.clear()
    from leap.core.drafters.suffix import SuffixDrafter

    monkeypatch.setattr(SuffixDrafter, "keeps_context", True)  # as lowbit's llama.cpp context does
    decoder = BatchDecoder(tiny_llama, [("suffix", {}), ("prompt-lookup", {})], num_tokens="auto", caps=(0, 2),
                           screen=False, first_step_setup="switch")
    skipped, lookups = 0, 0
    for _ in range(2):
        out = decoder.generate([[5, 9, 14, 20, 7, 11, 5, 9], [3, 8, 3, 8, 3, 8]], max_new_tokens=16)
        measured, previous = [], None
        for d, c in zip(out.drafters, out.caps):
            if c and d == 0 and d != previous:
                skipped += 1  # suffix after a plain step or prompt lookup's: a switch, not measured
            else:
                measured.append((d if c else 0, c))  # prompt lookup keeps no context: every step measured
            previous = d if c else None
        lookups += measured.count((1, 2))
        assert [tuple(a) for a in updates] == measured
        updates.clear()
    assert skipped and lookups
    with pytest.raises(SettingsError, match="switch"):
        BatchDecoder(tiny_llama, [("suffix", {})], num_tokens="auto", first_step_setup="always")


def test_the_bandit_is_told_which_drafters_the_batch_has_begun(tiny_llama, monkeypatch):
    """:meth:`BatchDecoder.generate` passes each step the drafters whose rows are already begun in this batch (red when
    it passes none: the bandit would explore a new drafter's setup at every step)."""
    from leap.core.policies.batch_caps import GoodputBandit

    seen: list[tuple[set, object]] = []
    choose = GoodputBandit.choose

    def spy(self, begun=None):
        arm = choose(self, begun)
        seen.append((set(begun or ()), arm))
        return arm

    monkeypatch.setattr(GoodputBandit, "choose", spy)
    decoder = BatchDecoder(tiny_llama, [("suffix", {}), ("prompt-lookup", {})], num_tokens="auto", caps=(0, 2),
                           screen=False)
    for first in (True, False):  # the second batch starts with none begun, whatever the first began
        decoder.generate([[5, 9, 14, 20, 7, 11, 5, 9], [3, 8, 3, 8, 3, 8]], max_new_tokens=12)
        batch, seen[:] = list(seen), []
        expected: set[int] = set()
        for begun, (drafter, cap) in batch:
            assert begun == expected
            expected = expected | ({drafter} if cap else set())
        # the first batch pulls every arm, so some drafter drafts there; in the second the bandit exploits what it
        # measured, which on the tiny model may be plain decoding throughout (a timing, not a defect)
        assert expected or not first


def test_cascade_and_lowbit_rows_share_one_low_bit_state_and_a_switch_between_them_is_measured(tiny_llama, monkeypatch):
    """In a batch as in a request's search, ``cascade`` and ``lowbit`` share one low-bit runner per row
    (:meth:`Drafter.shared_state_key`): neither catches its own context up on what the other committed, so a step of
    one after the other is no switch and is measured; a step after a plain or a model-free step still is a switch
    (red when each keeps a runner of its own, or when every change of drafter counts as a switch)."""
    from leap.core.policies.batch_caps import GoodputBandit

    arms = iter([(0, 2), (1, 2), (1, 2), (0, 2), (2, 2), (1, 2), (0, 0), (0, 2)] + [(0, 2)] * 40)
    updates: list = []
    update = GoodputBandit.update
    monkeypatch.setattr(GoodputBandit, "choose", lambda self, begun=None: next(arms))
    monkeypatch.setattr(GoodputBandit, "update", lambda self, arm, *a, **kw: (updates.append(tuple(arm)),
                                                                             update(self, arm, *a, **kw))[1])
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17, 18, 19, 20, 21]]
    decoder = BatchDecoder(tiny_llama, [("lowbit", {"backend": "torch-int8"}), ("cascade", {"then_backend": "torch-int8"}),
                                        ("suffix", {})], num_tokens="auto", caps=(0, 2), first_step_setup="switch")
    out = decoder.generate(prompts, max_new_tokens=24)
    assert [r.token_ids for r in out.rows] == [_alone(tiny_llama, p, 24).token_ids for p in prompts]
    lowbit, cascade = decoder._pools[0], decoder._pools[1]
    assert all(c.then.runner is l.runner for l, c in zip(lowbit, cascade))  # row r's state, shared
    assert len({id(l.runner) for l in lowbit}) == len(prompts)  # one state a row, not one for the batch
    steps = list(zip(out.drafters, out.caps))
    assert len(steps) > 8
    # unmeasured: lowbit's first step (nothing drafted before), cascade's after suffix's, lowbit's after plain's
    assert updates == [arm for k, arm in enumerate(steps) if k not in (0, 5, 7)]
