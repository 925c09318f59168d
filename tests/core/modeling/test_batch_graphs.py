"""Batched decoding on static buffers with every layer replayed (:mod:`leap.core.modeling.graphs.batch`; off a GPU the
replays are :class:`~leap.core.modeling.graphs.engine.Replay`): each row is its prompt decoded alone, through rows
that finish, holes and packing, drafts and LEAP's layer drafts; sampled rows draw what the eager batch draws; the
graphs are captured once per row count, never inside a later batch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core import SelfSpecDecoder
from leap.core.config import LayerConfig
from leap.core.decoding.batch import BatchDecoder
from tests.core.decoding.test_batch import _NearOracle
from tests.tiny import same_or_float_tie

prompts = st.lists(st.lists(st.integers(4, 12), min_size=1, max_size=18), min_size=1, max_size=4)


def _alone(model, prompt, max_new):
    return SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=max_new)


def _rows_match(model, batch, out, alone):
    for p, row, ref in zip(batch, out.rows, alone):
        assert same_or_float_tie(model, p, row.token_ids, ref.token_ids), (row.token_ids, ref.token_ids)
        assert row.token_ids != ref.token_ids or row.stop_reason == ref.stop_reason


@settings(max_examples=25, deadline=None)
@given(batch=prompts, drafter=st.sampled_from([None, "prompt-lookup", "suffix", "oracle"]),
       cap=st.integers(0, 6), max_new=st.integers(1, 14), pack=st.booleans())
def test_every_row_on_static_buffers_is_plain_decoding_of_its_prompt_alone(tiny_llama, batch, drafter, cap, max_new,
                                                                           pack):
    alone = [_alone(tiny_llama, p, max_new) for p in batch]
    if drafter == "oracle":
        _NearOracle.reference = {tuple(p): a.token_ids + [0] * 20 for p, a in zip(batch, alone)}
        drafter = _NearOracle
    decoder = BatchDecoder(tiny_llama, drafter, num_tokens=cap, compact_min=0 if pack else 10_000,
                           compact_share=0, graphs=True)
    out = decoder.generate(batch, max_new_tokens=max_new)
    _rows_match(tiny_llama, batch, out, alone)
    if max(len(p) for p in batch) > 1:
        assert decoder._engines[len(batch)].graphs  # the static path ran


def test_rows_that_finish_stay_as_dead_rows_and_the_others_go_on(tiny_llama):
    """A near-oracle drafts so rows accept different lengths (holes) and rows end at different steps (a short budget
    for none: EOS or the budget); the finished rows' buffer rows stay, masked, while the others decode."""
    batch = [[5, 6, 7, 8, 9, 10], [11, 4], [6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6], [9]]
    alone = [_alone(tiny_llama, p, 24) for p in batch]
    _NearOracle.reference = {tuple(p): a.token_ids + [0] * 20 for p, a in zip(batch, alone)}
    for compact in (0, 10_000):
        decoder = BatchDecoder(tiny_llama, _NearOracle, num_tokens=6, compact_min=compact, compact_share=0, graphs=True)
        out = decoder.generate(batch, max_new_tokens=24)
        assert [r.token_ids for r in out.rows] == [a.token_ids for a in alone]
        assert len({len(r.accepted_lengths) for r in out.rows}) > 1  # rows left at different steps
        assert max(max(r.accepted_lengths) for r in out.rows) > 1


@pytest.mark.parametrize("config", ["EEEEEE", "ESEEEE", "EEERER", "ESSREE"])
def test_a_rows_layer_draft_on_static_buffers_is_the_single_requests_draft(tiny_llama, config):
    """LEAP's layer draft, depth by depth on the static buffers: each row accepts at every step what the single
    request's draft of the same configuration accepts (its skipped layers write nothing, a repeated layer writes its
    slots twice, the draft's entries never reach verification)."""
    cfg = LayerConfig.parse(config)
    batch = [[5, 9, 14, 7, 9, 14, 3, 3, 8], [6, 8], [11, 4, 4, 9, 2, 7]]
    out = BatchDecoder(tiny_llama, layer_config=cfg, num_tokens=4, compact_min=0, compact_share=0,
                       graphs=True).generate(batch, max_new_tokens=16)
    for p, row in zip(batch, out.rows):
        single = SelfSpecDecoder(tiny_llama, cfg, "fixed", policy_kwargs={"k": 4}).generate(p, max_new_tokens=16)
        assert row.token_ids == single.token_ids
        assert row.accepted_lengths == [s.committed for s in single.steps]


@pytest.mark.parametrize("model", ["tiny_qwen2", "tiny_mistral"])
def test_other_architectures_stay_lossless_and_a_sliding_window_decodes_eagerly(model, request):
    tiny = request.getfixturevalue(model)
    batch = [[5, 6, 7, 8, 9, 10, 4, 4, 5, 6, 7, 8], [11, 4], [9]]
    decoder = BatchDecoder(tiny, "prompt-lookup", num_tokens=3, compact_min=0, compact_share=0, graphs=True)
    out = decoder.generate(batch, max_new_tokens=12)
    _rows_match(tiny, batch, out, [_alone(tiny, p, 12) for p in batch])
    assert bool(decoder._engines) == (not decoder.stack.window)


def test_sampled_rows_on_static_buffers_draw_what_the_eager_batch_draws(tiny_llama):
    """At T = 1 each row draws with its own generator from the same target (and draft) distributions as the eager
    batch, so with the same seeds the same tokens (the eager batch's sampling is tested against the exact
    distribution, with a negative control, in ``tests/core/decoding/test_batch.py``)."""
    batch = [[4, 7, 4, 7, 4, 7, 4], [9, 2], [5, 5, 6]]
    for drafter, kwargs in (("prompt-lookup", {}), (None, {"layer_config": LayerConfig.parse("ESEESE")})):
        eager = BatchDecoder(tiny_llama, drafter, num_tokens=3, **kwargs)
        static = BatchDecoder(tiny_llama, drafter, num_tokens=3, graphs=True, **kwargs)
        for seed in range(6):
            a = eager.generate(batch, max_new_tokens=10, temperature=1.0, seed=seed)
            b = static.generate(batch, max_new_tokens=10, temperature=1.0, seed=seed)
            assert [r.token_ids for r in a.rows] == [r.token_ids for r in b.rows]


def test_graphs_are_captured_once_per_row_count_and_kept_across_batches(tiny_llama):
    """Every width's graphs are captured when a row count's buffers are made; later batches of that row count, shorter
    or as long, replay them (no capture inside a batch), and a batch that needs more slots makes larger buffers."""
    decoder = BatchDecoder(tiny_llama, "prompt-lookup", num_tokens=6, graphs=True)
    decoder.generate([[5, 6, 7, 5, 6, 7], [8, 9]], max_new_tokens=8)
    engine = decoder._engines[2]
    captured = len(engine.graphs)
    assert captured == tiny_llama.num_layers * 6 and engine.checked == set(engine.graphs) and not engine.broken
    decoder.generate([[4, 4, 4], [7, 8, 9, 10]], max_new_tokens=8)
    assert decoder._engines[2] is engine and len(engine.graphs) == captured
    decoder.generate([[4] * 150, [7, 8]], max_new_tokens=60)  # past the first buffers' slots
    assert decoder._engines[2] is not engine and decoder._engines[2].capacity > engine.capacity


def test_a_replay_that_differs_from_its_eager_layer_is_dropped_and_the_layer_runs_eagerly(tiny_llama, monkeypatch,
                                                                                         capsys):
    """Red when a graph's first replay is trusted unchecked: a stand-in whose replay writes a wrong output."""
    import leap.core.modeling.graphs.engine as engine_module
    from leap.core.modeling.graphs.engine import Replay

    monkeypatch.setattr(engine_module, "capture", lambda fn, device, pool=None: Replay(lambda: fn().add_(1.0)))
    monkeypatch.setattr(engine_module, "_SAID", set())
    batch = [[5, 6, 7, 8], [9, 10]]
    decoder = BatchDecoder(tiny_llama, graphs=True)
    out = decoder.generate(batch, max_new_tokens=6)
    assert [r.token_ids for r in out.rows] == [_alone(tiny_llama, p, 6).token_ids for p in batch]
    engine = decoder._engines[2]
    assert engine.graphs and engine.broken == set(engine.graphs)
    assert "differed from the same layer run eagerly" in capsys.readouterr().err


def test_a_second_batch_while_the_first_holds_the_buffers_decodes_eagerly(tiny_llama):
    from leap.core.decoding.batch_state import BatchState
    from leap.core.modeling.graphs.batch import StaticBatchState

    decoder = BatchDecoder(tiny_llama, graphs=True)
    first = decoder.start([[5, 6, 7], [8, 9]], max_new_tokens=4)
    second = decoder.start([[4, 4], [6, 7, 8]], max_new_tokens=4)
    assert isinstance(first.state, StaticBatchState) and type(second.state) is BatchState
    while not second.done:
        second.step(0)
    while not first.done:
        first.step(0)
    for session, batch in ((first, [[5, 6, 7], [8, 9]]), (second, [[4, 4], [6, 7, 8]])):
        assert [r.token_ids for r in session.outcome().rows] == [_alone(tiny_llama, p, 4).token_ids for p in batch]


def test_the_flag_is_off_unless_asked_for(tiny_llama, monkeypatch):
    monkeypatch.delenv("LEAP_BATCH_GRAPHS", raising=False)
    assert not BatchDecoder(tiny_llama).graphs
    monkeypatch.setenv("LEAP_BATCH_GRAPHS", "1")
    assert BatchDecoder(tiny_llama).graphs and not BatchDecoder(tiny_llama, graphs=False).graphs
    from leap.core.modeling.graphs.batch import StaticBatchState

    assert isinstance(BatchDecoder(tiny_llama).start([[5, 6]], max_new_tokens=1).state, StaticBatchState)
