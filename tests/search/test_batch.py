"""The drafter search at batch level (leap.search.batch): lossless rows, and a memory whose batches are a condition of
their own."""

from __future__ import annotations

import json

import pytest

from leap.core.decoding.batch import BatchDecoder
from leap.core.decoding.batch_state import BatchOutcome
from leap.core.errors import SettingsError
from leap.search.batch import BatchSearch
from leap.search.memory import SearchMemory

PROMPTS = [[5, 9, 14, 20, 7, 11, 5, 9, 14], [3, 8, 3, 8, 3, 8, 12], [22, 4, 17, 6, 22, 4]]
OPTIONS = ["prompt-lookup", "suffix", "token-recycling"]


def test_every_row_of_the_batch_search_is_its_prompt_decoded_alone(tiny_llama):
    search = BatchSearch(tiny_llama, [*OPTIONS, "layer-skip"], caps=(0, 2, 4))
    assert [o.name for o in search.options] == OPTIONS  # layer drafts do not batch
    plain = BatchDecoder(tiny_llama).generate(PROMPTS, max_new_tokens=12)
    for _ in range(2):  # the bandit kept across batches
        out = search.generate(PROMPTS, max_new_tokens=12)
        assert [r.token_ids for r in out.rows] == [r.token_ids for r in plain.rows]
        # every step's rows, tokens and seconds, as the search's tally of drafting reads them
        assert sum(out.step_committed) == out.new_tokens and len(out.step_s) == len(out.step_rows) == out.steps
        assert out.step_rows[0] == len(PROMPTS) and sum(out.step_rows) == sum(r.steps for r in out.rows)
        assert 0 < sum(out.step_s) <= out.decode_time_s
    assert not search.decoder.switching and search.decoder.bar == "plain"  # the defaults reach the bandit
    assert search.decoder.first_step_setup == "switch" and search.prune == 1.0
    variant = BatchSearch(tiny_llama, OPTIONS, caps=(0, 2), screen="best", switching=True, first_step_setup=True)
    variant.generate(PROMPTS[:1], max_new_tokens=4)
    bandit = variant.decoder.policy(1)
    assert bandit.switching and bandit.bar == "best" and variant.decoder.first_step_setup
    with pytest.raises(SettingsError, match="batch"):
        BatchSearch(tiny_llama, ["layer-skip"]).generate(PROMPTS, max_new_tokens=4)


def test_what_single_requests_measured_does_not_rank_the_drafters_of_a_batch(tiny_llama):
    """The memory's short-prompt set, where prompt lookup lost, leaves every drafter in a batch and in its own order
    (red when the batch search reads the single-request set: prompt lookup would be left out)."""
    memory = SearchMemory(None, keep=0.85, min_requests=2)
    for _ in range(2):
        memory.observe({"suffix": 2.0, "prompt-lookup": 0.5, "token-recycling": 1.9}, "suffix", 2.0)
    search = BatchSearch(tiny_llama, OPTIONS, memory=memory, caps=(0, 2))
    search.generate(PROMPTS, max_new_tokens=8)
    assert search.labels == OPTIONS


def test_a_batch_teaches_the_memorys_batch_set_and_the_next_run_ranks_by_it(tiny_llama, tmp_path):
    """After each batch the memory learns, per drafter, its best goodput over plain's as the bandit measured it, in
    the batch set alone (saved under "batches"); a later run's batch search ranks and prunes by that set."""
    memory = SearchMemory(tmp_path / "m.json", keep=0.85, min_requests=2)
    search = BatchSearch(tiny_llama, OPTIONS, memory=memory, caps=(0, 2))
    for _ in range(2):
        search.generate(PROMPTS, max_new_tokens=10)
    learnt = memory.sets["batch"]
    assert learnt and set(learnt) <= set(OPTIONS) and not memory.sets["short"] and not memory.sets["long"]
    assert all(entry["requests"] == 2 and entry["mean"] > 0 for entry in learnt.values())
    expected = search.decoder.goodput_over_plain(len(PROMPTS))
    assert {search.labels[d] for d in expected} == set(learnt)

    again = SearchMemory(tmp_path / "m.json", keep=0.85, min_requests=2)
    again.sets["batch"] = {"suffix": {"requests": 2, "mean": 1.6, "last": again.requests},
                           "prompt-lookup": {"requests": 2, "mean": 0.7, "last": again.requests}}
    later = BatchSearch(tiny_llama, OPTIONS, memory=again, caps=(0, 2))
    later.generate(PROMPTS[:2], max_new_tokens=6)
    assert later.labels == ["suffix", "token-recycling"]  # prompt lookup remembered losing; the unseen one last


def test_after_a_batch_only_the_drafters_near_the_best_measured_goodput_draft_on(tiny_llama):
    """Successive elimination within a run: after a batch, the drafters whose best measured goodput is below
    ``prune`` times the best drafter's are retired (at 1.0 all but the best), so the next batch never drafts with
    them; with ``prune=None`` every drafter drafts on. Red when the retirement is not applied."""
    runs = {}
    for prune in (1.0, None):
        search = BatchSearch(tiny_llama, OPTIONS, caps=(0, 2), loss_budget=None, prune=prune)
        first = search.generate(PROMPTS, max_new_tokens=16)
        assert len({d for d, cap in zip(first.drafters, first.caps) if cap}) >= 2  # several drafters tried
        measured = search.decoder.goodput_over_plain(len(PROMPTS))
        best = max(measured, key=measured.get)
        runs[prune] = set(search.decoder.retired)
        later = search.generate(PROMPTS, max_new_tokens=16)
        if prune:
            assert runs[prune] == set(measured) - {best} and runs[prune]
            assert not {d for d, cap in zip(later.drafters, later.caps) if cap} & runs[prune]
    assert runs[None] == set()
    with pytest.raises(SettingsError, match="prune"):
        BatchSearch(tiny_llama, OPTIONS, prune=1.5)


def test_forget_leaves_the_search_as_if_no_batch_had_run(tiny_llama):
    """What the warm-up taught is forgotten (``leap bench`` calls it after its untimed calls): no bandit, no retired
    drafter; the next batch's bandit starts from every arm untried."""
    search = BatchSearch(tiny_llama, OPTIONS, caps=(0, 2), loss_budget=None)
    search.generate(PROMPTS, max_new_tokens=8)
    assert search.decoder.retired and search.decoder.policy(len(PROMPTS)).means()
    search.forget()
    assert not search.decoder.retired and not search.decoder.policy(len(PROMPTS)).means()


def test_a_retired_drafter_never_comes_back_however_the_others_values_fall(tiny_llama, monkeypatch):
    """Successive elimination is for good: a retired drafter's value is frozen, so when the drafter left drafting falls
    below it (here 0.9 against 1.0), nothing is retired and nothing comes back - before, the two took turns batch by
    batch. Red when the comparison takes in the retired drafters' frozen values."""
    search = BatchSearch(tiny_llama, OPTIONS[:2], caps=(0, 2), loss_budget=None, prune=None)
    script = iter([{0: 1.0, 1: 1.2}, {0: 1.0, 1: 0.9}, {0: 1.0, 1: 0.8}])
    search.generate(PROMPTS, max_new_tokens=4)  # makes the decoder; nothing retired yet
    search.prune = 1.0
    monkeypatch.setattr(search.decoder, "goodput_over_plain", lambda rows: next(script))
    seen = []
    for _ in range(3):
        search.generate(PROMPTS, max_new_tokens=4)
        seen.append(set(search.decoder.retired))
    assert seen == [{0}, {0}, {0}]


def test_the_elimination_judges_the_drafters_that_share_the_best_ones_state_by_their_steps_all_in(tiny_llama,
                                                                                                    monkeypatch):
    """``lowbit`` and ``cascade`` share one low-bit runner a row in a batch, so switching between them costs nothing:
    when one of them is the best after a batch, the bandit's values do not retire the other (which of the two is ahead
    by them after one batch is noise), while a drafter of its own state below the best is retired. Between the kin,
    their steps all in decide (the decoder's tally: fair among them): the one below the best such stops, and one not
    yet counted stays; ``kin_all_in=False`` keeps both. Here ``kin_confidence=None``: the point estimates decide
    (below, the test of their noise). Red when the kin are retired with the rest, kept whatever their steps gave, or
    one not yet counted is retired."""
    options = ["suffix", "lowbit:backend=torch-int8", "cascade:then_backend=torch-int8"]
    for kin_all_in in (True, False):
        search = BatchSearch(tiny_llama, options, caps=(0, 2), loss_budget=None, prune=None, kin_all_in=kin_all_in,
                             kin_confidence=None)
        search.generate(PROMPTS, max_new_tokens=16)  # every arm pulled: every drafter's rows made
        suffix, lowbit, cascade = (search.labels.index(o) for o in options)
        assert search.decoder.kin(cascade) == {lowbit, cascade} and search.decoder.kin(suffix) == {suffix}
        search.prune = 1.0
        monkeypatch.setattr(search.decoder, "goodput_over_plain", lambda rows: {suffix: 1.0, lowbit: 1.1, cascade: 1.2})
        monkeypatch.setattr(search.decoder.tally, "speedup", {lowbit: 1.3}.get)  # cascade: no counted step yet
        later = search.generate(PROMPTS, max_new_tokens=8)
        assert search.decoder.retired == {suffix}
        assert all(r.token_ids == BatchDecoder(tiny_llama).generate([p], max_new_tokens=8).rows[0].token_ids
                   for r, p in zip(later.rows, PROMPTS))
        monkeypatch.setattr(search.decoder.tally, "speedup", {lowbit: 1.3, cascade: 1.1}.get)
        search.generate(PROMPTS, max_new_tokens=8)
        assert search.decoder.retired == ({suffix, cascade} if kin_all_in else {suffix})


def test_a_kin_behind_the_best_stops_only_once_its_tally_says_so_beyond_noise(tiny_llama, monkeypatch):
    """With ``kin_confidence`` (0.95 by default), a kin behind the best by the point estimates drafts on until the tally
    says it is below beyond the noise of their steps (:meth:`~leap.core.policies.loss_budget.DraftingTally.below`,
    asked at the search's ``prune`` and confidence), then stops. Red when the point estimates decide, the best is
    asked whether it is below the other, or ``prune`` or the confidence do not reach the tally."""
    options = ["lowbit:backend=torch-int8", "cascade:then_backend=torch-int8"]
    search = BatchSearch(tiny_llama, options, caps=(0, 2), loss_budget=None, prune=0.9, kin_confidence=0.8,
                         kin_by_rows=False)
    search.generate(PROMPTS, max_new_tokens=16)
    lowbit, cascade = (search.labels.index(o) for o in options)
    monkeypatch.setattr(search.decoder, "goodput_over_plain", lambda rows: {lowbit: 1.2, cascade: 1.1})
    monkeypatch.setattr(search.decoder.tally, "speedup", {lowbit: 1.3, cascade: 1.0}.get)
    asked = []
    verdict = {"decisive": False}

    def below(drafter, other, share=1.0, confidence=0.95, by_rows=False):
        asked.append((drafter, other, share, confidence))
        return verdict["decisive"] and drafter == cascade

    monkeypatch.setattr(search.decoder.tally, "below", below)
    search.generate(PROMPTS, max_new_tokens=8)
    assert search.decoder.retired == set()  # 1.0 against 1.3, but within the noise: both draft on
    assert (cascade, lowbit, 0.9, 0.8) in asked and all(other == lowbit for _, other, _, _ in asked)
    verdict["decisive"] = True
    search.generate(PROMPTS, max_new_tokens=8)
    assert search.decoder.retired == {cascade}
    with pytest.raises(SettingsError, match="kin_confidence"):
        BatchSearch(tiny_llama, options, kin_confidence=1.5)


def test_the_kin_are_compared_row_count_by_row_count_whichever_leads_pooled(tiny_llama, monkeypatch):
    """By default (``kin_by_rows``) each kin is asked, row count by row count, whether it is below any other kin - not
    only the one ahead pooled over rows, which may lead by the mix of its steps alone: here ``cascade`` leads pooled
    and ``lowbit`` is ahead by rows, so ``cascade`` stops. Red when the pooled leader is never asked, the comparison is
    pooled, or ``kin_by_rows=False`` does not restore the pooled test against the leader (each planted)."""
    options = ["lowbit:backend=torch-int8", "cascade:then_backend=torch-int8"]
    for by_rows in (True, False):
        search = BatchSearch(tiny_llama, options, caps=(0, 2), loss_budget=None, prune=1.0, kin_by_rows=by_rows)
        search.generate(PROMPTS, max_new_tokens=16)
        lowbit, cascade = (search.labels.index(o) for o in options)
        monkeypatch.setattr(search.decoder, "goodput_over_plain", lambda rows: {lowbit: 1.2, cascade: 1.1})
        monkeypatch.setattr(search.decoder.tally, "speedup", {lowbit: 1.1, cascade: 1.4}.get)  # cascade leads pooled
        asked = []

        def below(drafter, other, share=1.0, confidence=0.95, *, by_rows=False):
            asked.append((drafter, other, by_rows))
            return by_rows and drafter == cascade  # by rows, cascade is below lowbit; pooled, nobody is

        monkeypatch.setattr(search.decoder.tally, "below", below)
        search.generate(PROMPTS, max_new_tokens=8)
        if by_rows:
            assert search.decoder.retired == {cascade} and (cascade, lowbit, True) in asked
        else:
            assert search.decoder.retired == set() and (lowbit, cascade, False) in asked
            assert all(other == cascade and not rows for _, other, rows in asked)  # the pooled leader alone
    assert BatchSearch(tiny_llama, options).kin_by_rows is True  # the default


def test_a_sampled_batch_reads_and_teaches_the_memorys_sampled_batch_set(tiny_llama):
    """A batch at T > 0 is ranked by, and teaches, the memory's "sampled-batch" set, never the greedy batches', even
    after greedy batches made the search's drafters (``leap bench`` warms up at T = 0 first): each condition has its
    own decoder, kept across its batches. Red when the search does not pass the batch's temperature to the memory, or
    keeps the first batch's ranking for every condition."""
    memory = SearchMemory(None, min_requests=1)
    memory.condition(10, rows=2)
    memory.observe_batch({"prompt-lookup": 0.5, "suffix": 1.5})  # greedy batches: prompt lookup lost
    search = BatchSearch(tiny_llama, OPTIONS, memory=memory, caps=(0, 2), loss_budget=None)
    search.generate(PROMPTS, max_new_tokens=8)
    greedy = search.decoder
    assert "prompt-lookup" not in search.labels
    search.generate(PROMPTS, max_new_tokens=8, temperature=1.0, seed=3)
    assert "prompt-lookup" in search.labels and search.decoder is not greedy  # not left out on the greedy word
    assert memory.sets["sampled-batch"] and "prompt-lookup" not in search.decoders["batch"][1]
    search.generate(PROMPTS, max_new_tokens=8)
    assert search.decoder is greedy


def _prior_memory(tmp_path, means):
    """A memory started from a shipped prior (another machine's) whose batch set holds ``means``."""
    path = tmp_path / "prior.json"
    path.write_text(json.dumps({"batches": {label: {"requests": 11, "mean": mean} for label, mean in means.items()}}))
    memory = SearchMemory(None, keep=0.85, min_requests=2)
    memory.start_from_prior(path)
    return memory


def _batch_drafting_at(search, ratio, rows=3):
    """A batch whose one drafting step took ``ratio`` times what plain steps would have for its tokens (a plain step's
    seconds at its row count, as the search's bandit measured it), beside a plain step of an hour that the tally must
    leave out: what the decoder's tally, which :meth:`BatchSearch._rejoin` reads after a batch, adds up."""
    plain = search.decoder.policy(rows).means()[(0, 0)]  # tokens a row per second
    committed = 2 * rows
    return BatchOutcome([], 2, 0.0, 0.0, [2, 0], [0, 0], [rows, rows], [committed, rows],
                        [ratio * committed / rows / plain, 3600.0], [1, 1], [committed / rows, 1.0])


def test_drafters_left_out_on_the_priors_word_join_once_drafting_has_not_paid(tiny_llama, tmp_path):
    """The prior (another machine) keeps ``suffix`` alone; the others are held - in the decoder, never drafting - while
    drafting pays over the run's batches, every cost counted (the tally of drafting seconds against plain steps'
    for the same tokens: 0.2, 0.2, then 1.3 of plain's time, 0.57 over the three), and join for the rest of the run
    once it has not (a fourth batch at 4 times plain's), the rows still each prompt decoded alone. ``rejoin=False``
    leaves them out (the ablation); ``forget`` holds them again. Red when the held drafters are not retired at the
    start, never join, join on one losing batch, count plain steps, or stay joined after ``forget``."""
    prior = {"suffix": 2.0, "prompt-lookup": 0.5, "token-recycling": 0.4}
    search = BatchSearch(tiny_llama, OPTIONS, memory=_prior_memory(tmp_path, prior), caps=(0, 2), loss_budget=None)
    first = search.generate(PROMPTS, max_new_tokens=16)
    assert search.labels == ["suffix", "prompt-lookup", "token-recycling"]
    assert {d for d, cap in zip(first.drafters, first.caps) if cap} <= {0}  # held: never drafting
    search.forget()  # held again, whatever that batch's tally said; the tally from here on: the batches below alone
    assert search.held["batch"] == {1, 2} and search.decoder.retired == {1, 2}
    search.decoder.policy(len(PROMPTS)).update((0, 0), 1.0, 0.05)  # a plain step: 20 tokens a row a second
    for ratio in (0.2, 0.2, 1.3):
        search.decoder.tally.add(_batch_drafting_at(search, ratio), search.decoder.plain_rate)
        search._rejoin()
        assert search.held["batch"] == {1, 2} and {1, 2} <= search.decoder.retired
    search.decoder.tally.add(_batch_drafting_at(search, 4.0), search.decoder.plain_rate)
    search._rejoin()
    assert not search.held["batch"] and not search.decoder.retired & {1, 2}
    later = search.generate(PROMPTS, max_new_tokens=24)
    assert {d for d, cap in zip(later.drafters, later.caps) if cap} & {1, 2}  # the joined drafters drafted
    plain = BatchDecoder(tiny_llama).generate(PROMPTS, max_new_tokens=24)
    assert [r.token_ids for r in later.rows] == [r.token_ids for r in plain.rows]
    search.forget()
    assert search.held["batch"] == {1, 2} and search.decoder.retired == {1, 2}

    ablation = BatchSearch(tiny_llama, OPTIONS, memory=_prior_memory(tmp_path, prior), caps=(0, 2), rejoin=False)
    ablation.generate(PROMPTS, max_new_tokens=4)
    assert ablation.labels == ["suffix"] and not ablation.held["batch"]


def test_warm_begins_every_drafters_rows_and_measures_nothing(tiny_llama, monkeypatch):
    """``BatchSearch.warm`` (called by ``leap bench`` after its warm-up): every drafter of the condition's decoder, held
    ones too, has its rows made for the batch, and no bandit, budget or tally has seen a step; the batch after it
    decodes as alone. Red when a drafter is left out or the warm steps are measured."""
    memory = SearchMemory()
    search = BatchSearch(tiny_llama, OPTIONS, caps=(0, 2), memory=memory, loss_budget=0.05)
    search.warm(PROMPTS, temperature=0.0)
    decoder = search.decoder
    assert len(decoder.specs) == len(OPTIONS)
    assert all(len(pool) >= len(PROMPTS) for pool in decoder._pools)  # every drafter's rows made
    assert not decoder._policies and decoder.tally.seconds == 0.0 and memory.sets.get("batch") in (None, {})
    assert decoder.budget.fruitless == 0 and decoder.retired == frozenset()
    plain = BatchDecoder(tiny_llama).generate(PROMPTS, max_new_tokens=12)
    out = search.generate(PROMPTS, max_new_tokens=12)
    assert [r.token_ids for r in out.rows] == [r.token_ids for r in plain.rows]
