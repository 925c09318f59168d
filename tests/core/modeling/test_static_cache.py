"""The static cache and the graph engine (leap.core.modeling.graphs.static_cache, leap.core.modeling.graphs) on the CPU.

Every forward a decoding session makes - drafts under configurations that skip and repeat layers, chains and trees of
every width, rollbacks, an accepted tree path moved into place - gives through the static cache (and through the graph
engine's buffers, replayed by its CPU stand-in) what leap's eager cache gives, and decoding through them is lossless.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core import LayerConfig, SelfSpecDecoder
from leap.core.modeling.graphs import engine as graphs_module
from leap.core.modeling.layers import LayerStack
from leap.core.modeling.graphs.static_cache import StaleSlotError, StaticKVCache
from tests.tiny import same_or_float_tie

LAYERS = 6
#: the static cache attends over its whole buffer where the eager one attends over what it holds: another SDPA call,
#: so another summation order (measured: hidden states differ by <= 1e-5 on the tiny model); a slot read wrongly
#: moves them by ~1e-1
CLOSE = dict(atol=1e-4, rtol=1e-4)


def _tree(draw, n: int) -> list[int]:
    """Parents of nodes 1..n (node 0: the pending token), each an earlier node."""
    return [draw(st.integers(0, i - 1)) for i in range(1, n + 1)]


def _tree_inputs(parents: list[int], base: int, dtype, device="cpu"):
    depth = [0]
    for p in parents:
        depth.append(depth[p] + 1)
    n = len(parents) + 1
    mask = torch.full((1, 1, n, base + n), torch.finfo(dtype).min, dtype=dtype, device=device)
    mask[..., :base] = 0
    for i in range(n):
        j = i
        while True:
            mask[0, 0, i, base + j] = 0
            if j == 0:
                break
            j = parents[j - 1]
    return [base + d for d in depth], mask


@st.composite
def sessions(draw):
    """A prefill length and a few steps: a draft under a random plan, then a chain or a tree verified and accepted."""
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        actions = draw(st.lists(st.sampled_from([0, 1, 2]), min_size=LAYERS, max_size=LAYERS))
        width = draw(st.integers(1, 6))
        tree = draw(st.booleans())
        parents = _tree(draw, width - 1) if tree else None
        if tree:
            node = draw(st.integers(0, width - 1))
            path = []
            while node:
                path.append(node)
                node = parents[node - 1]
            accept = sorted(path)
        else:
            accept = draw(st.integers(0, width - 1))
        steps.append((actions, draw(st.integers(1, 3)), width, parents, accept))
    return draw(st.integers(1, 12)), steps


def _replay(stack: LayerStack, prefill: int, steps, ids) -> list[torch.Tensor]:
    """Every forward's output of a session of ``steps`` (see :func:`sessions`) through ``stack``."""
    outs = []
    cache = stack.new_cache(prefill + 64)
    committed = prefill

    def run(hidden, plan, start, **kw):
        outs.append(stack.run_layers(hidden, plan, cache, start, **kw))
        return outs[-1]

    with torch.inference_mode():
        run(stack.embed(ids[:prefill]), stack.full_plan, 0)
        for actions, drafted, width, parents, accept in steps:
            plan = tuple((i, a) for i, a in enumerate(actions) if a)
            for t in range(drafted):  # the draft: one token at a time through the configuration's layers
                run(stack.embed(ids[committed + t: committed + t + 1]), plan, committed + t)
            stack.rollback(cache, committed)
            tokens = ids[committed: committed + width]
            if parents is None:
                run(stack.embed(tokens), stack.full_plan, committed)
                committed += accept + 1
            else:
                positions, mask = _tree_inputs(parents, committed, stack.dtype, stack.device)
                run(stack.embed(tokens), stack.full_plan, committed, positions=positions, mask=mask)
                stack.keep(cache, committed + 1, [committed + r for r in accept])
                committed += len(accept) + 1
            stack.rollback(cache, committed)
        outs.append(stack.logits(run(stack.embed(ids[committed: committed + 1]), stack.full_plan, committed)))
    return outs


@pytest.mark.parametrize("engine", ["static", "graphs"])
@settings(max_examples=30, deadline=None)
@given(session=sessions(), seed=st.integers(0, 10_000))
def test_every_forward_of_a_session_is_the_eager_caches(tiny_llama, engine, session, seed):
    """Random sessions: drafts that skip and repeat layers, chains and trees of widths 1-6, rollbacks and accepted
    tree paths. Red on a planted off-by-one slot, a mask that lets a query see one slot past its own (a rejected draft's
    entry left visible after a rollback), or a graph input buffer not refreshed."""
    prefill, steps = session
    ids = torch.randint(4, 97, (prefill + 8 * len(steps) + 8,), generator=torch.Generator().manual_seed(seed)).tolist()
    expected = _replay(LayerStack(tiny_llama, "eager"), prefill, steps, ids)
    got = _replay(LayerStack(tiny_llama, engine), prefill, steps, ids)
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert torch.allclose(a, b, **CLOSE), f"forward {i}: {(a - b).abs().max().item():.3g}"


@pytest.mark.parametrize("engine", ["static", "graphs"])
@settings(max_examples=12, deadline=None)
@given(skip=st.sets(st.integers(1, LAYERS - 2), max_size=3), repeat=st.sets(st.integers(1, LAYERS - 1), max_size=2),
       drafter=st.sampled_from([None, "prompt-lookup", "stand", "suffix"]), seed=st.integers(0, 1000))
def test_decoding_through_the_static_engines_is_lossless(tiny_llama, engine, skip, repeat, drafter, seed):
    """Greedy speculative decoding through the engine is plain decoding through it, token for token, and plain decoding
    through it is leap's eager plain decoding (up to a float32 tie)."""
    config = LayerConfig.from_sets(LAYERS, skip=sorted(skip), repeat=sorted(repeat - skip))
    prompt = torch.randint(4, 20, (10,), generator=torch.Generator().manual_seed(seed)).tolist()
    plain = SelfSpecDecoder(tiny_llama, None, engine=engine).generate(prompt, max_new_tokens=24).token_ids
    spec = SelfSpecDecoder(tiny_llama, config, drafter=drafter, engine=engine).generate(prompt, max_new_tokens=24)
    assert spec.token_ids == plain
    eager = SelfSpecDecoder(tiny_llama, None, engine="eager").generate(prompt, max_new_tokens=24).token_ids
    assert same_or_float_tie(tiny_llama, prompt, plain, eager)


def test_a_layer_that_would_read_an_unwritten_slot_is_refused(tiny_llama):
    stack = LayerStack(tiny_llama, "static")
    cache = stack.new_cache(32)
    with torch.inference_mode():
        stack.run_layers(stack.embed([5, 6, 7]), stack.full_plan, cache, 0)
        stack.rollback(cache, 1, range(2, LAYERS))
        with pytest.raises(StaleSlotError, match="layer 2 holds 1 entries but runs at position 3"):
            stack.run_layers(stack.embed([8]), stack.full_plan, cache, 3)


def test_a_rollback_moves_lengths_and_the_next_write_overwrites_in_place(tiny_llama):
    """No copies: a rollback leaves the buffers as they are; the next forward writes the same slots."""
    stack = LayerStack(tiny_llama, "static")
    cache = stack.new_cache(32)
    with torch.inference_mode():
        stack.run_layers(stack.embed([5, 6, 7, 8]), stack.full_plan, cache, 0)
        buffer = cache.layers[0]._keys
        stale = buffer[:, :, 3].clone()
        stack.rollback(cache, 2)
        assert cache.layers[0].length == 2 and torch.equal(buffer[:, :, 3], stale)
        stack.run_layers(stack.embed([9]), stack.full_plan, cache, 2)
        assert cache.layers[0]._keys is buffer and cache.layers[0].length == 3


def test_a_fork_copies_on_its_first_write_and_leaves_the_session_alone(tiny_llama):
    stack = LayerStack(tiny_llama, "static")
    cache = stack.new_cache(32)
    with torch.inference_mode():
        stack.run_layers(stack.embed([5, 6, 7, 8]), stack.full_plan, cache, 0)
        before = cache.layers[3]._keys.clone()
        fork = cache.fork(2)
        assert isinstance(fork, StaticKVCache) and fork.layers[3].length == 2
        stack.run_layers(stack.embed([20, 21]), stack.full_plan, fork, 2)
        assert torch.equal(cache.layers[3]._keys, before) and cache.layers[3].length == 4


# ---------------------------------------------------------------- the graph engine's bookkeeping
def test_every_graph_is_captured_at_the_first_forward_and_never_inside_a_later_request(tiny_llama, monkeypatch):
    captured = []
    real = graphs_module.capture
    monkeypatch.setattr(graphs_module, "capture", lambda fn, device, pool=None: captured.append(1) or real(fn, device))
    decoder = SelfSpecDecoder(tiny_llama, LayerConfig.from_sets(LAYERS, skip=[2, 3]), engine="graphs")
    decoder.generate([5, 6, 7, 8, 9], max_new_tokens=20)
    engine = decoder.stack.graphs
    every = {(i, w) for i in range(LAYERS) for w in graphs_module.WIDTHS} | {("head", w) for w in graphs_module.WIDTHS}
    assert set(engine.graphs) == every and len(captured) == len(every)
    assert engine.checked == every and not engine.broken
    capacity = engine.home.capacity
    assert capacity == graphs_module.capacity_bucket(5 + 20 + graphs_module.DRAFT_SLACK) == 256
    longer = [5, 6, 7, 8, 9] * 8  # a longer prompt, within the same capacity: the same cache, the same graphs
    out = decoder.generate(longer, max_new_tokens=30)
    assert len(captured) == len(every) and engine.home.capacity == capacity
    static = SelfSpecDecoder(tiny_llama, LayerConfig.from_sets(LAYERS, skip=[2, 3]), engine="static")
    assert out.token_ids == static.generate(longer, max_new_tokens=30).token_ids
    outgrown = [5, 6, 7, 8, 9] * 40  # 200 + 30 + the slack outgrows 256 slots: bound again, captured once more
    decoder.generate(outgrown, max_new_tokens=30)
    assert engine.home.capacity == 512 and len(captured) == 2 * len(every)


@pytest.mark.parametrize("slots, capacity", [(1, 256), (256, 256), (257, 512), (1000, 1024), (1025, 2048)])
def test_the_cache_capacity_is_a_power_of_two_of_at_least_256(slots, capacity):
    assert graphs_module.capacity_bucket(slots) == capacity


def test_capturing_again_mid_session_writes_above_the_held_entries_and_leaves_the_random_state(tiny_llama):
    """A cache that grows mid-session is bound again and every graph captured again: those captures' random inputs
    land above the session's entries (masked, overwritten by the next real write), and the caller's generator is
    untouched."""
    ids = list(range(5, 25))
    outs = {}
    for engine in ("static", "graphs"):
        stack = LayerStack(tiny_llama, engine)
        cache = stack.new_cache(24)
        with torch.inference_mode():
            stack.run_layers(stack.embed(ids[:10]), stack.full_plan, cache, 0)
            if engine == "graphs":
                stack.graphs._reset()  # as a growth would: the next forward captures everything again
                state = torch.random.get_rng_state()
            hidden = stack.run_layers(stack.embed(ids[10:13]), stack.full_plan, cache, 10)
            if engine == "graphs":
                assert stack.graphs.prepared and torch.equal(state, torch.random.get_rng_state())
            outs[engine] = stack.logits(stack.run_layers(stack.embed(ids[13:14]), stack.full_plan, cache, 13)), hidden
    assert torch.allclose(outs["graphs"][1], outs["static"][1], **CLOSE)
    assert torch.allclose(outs["graphs"][0], outs["static"][0], **CLOSE)


def test_a_replay_that_differs_from_the_eager_layer_is_dropped_said_and_decoding_stays_lossless(tiny_llama,
                                                                                              monkeypatch, capsys):
    real = graphs_module.capture

    def noisy(fn, device, pool=None):  # planted: every replay's output is off by 1e-3
        graph = real(fn, device)

        class Noisy:
            def replay(self):
                graph.replay()
                for bufs in engine.buffers.values():
                    bufs.hidden.add_(1e-3)
                    if bufs.logits is not None:
                        bufs.logits.add_(1e-3)

        return Noisy()

    monkeypatch.setattr(graphs_module, "_SAID", set())
    monkeypatch.setattr(graphs_module, "capture", noisy)
    decoder = SelfSpecDecoder(tiny_llama, None, engine="graphs")
    engine = decoder.stack.graphs
    out = decoder.generate([5, 6, 7, 8, 9], max_new_tokens=16).token_ids
    assert engine.broken and engine.broken == set(engine.graphs)
    assert "replay differed from the same layer run eagerly" in capsys.readouterr().err
    static = SelfSpecDecoder(tiny_llama, None, engine="static").generate([5, 6, 7, 8, 9], max_new_tokens=16)
    assert out == static.token_ids


def test_a_second_cache_while_the_first_is_held_runs_eagerly_and_says_so(tiny_llama, monkeypatch, capsys):
    monkeypatch.setattr(graphs_module, "_SAID", set())
    stack = LayerStack(tiny_llama, "graphs")
    first = stack.new_cache(16)
    second = stack.new_cache(16)
    assert not stack.graphs.usable(second, 1, stack.full_plan, None, None, None)
    assert stack.graphs.usable(first, 1, stack.full_plan, None, None, None)
    assert "runs eagerly" in capsys.readouterr().err
    del first, second
    assert stack.graphs.usable(stack.new_cache(16), 1, stack.full_plan, None, None, None)  # free again


def test_the_engine_is_said_in_model_info_and_graphs_off_is_eager(tiny_llama, monkeypatch):
    from leap.core.modeling.layers import default_engine

    assert default_engine("cpu") == "eager" and default_engine("cuda") == "graphs"
    monkeypatch.setenv("LEAP_GRAPHS", "0")
    assert default_engine("cuda") == "eager"
    LayerStack(tiny_llama, "static")
    assert tiny_llama.info["engine"] == "static"
    with pytest.raises(ValueError, match="unknown layer engine"):
        LayerStack(tiny_llama, "compiled")


def test_the_head_runs_before_any_cache_exists_and_a_batch_never_takes_the_engines_cache(tiny_llama):
    stack = LayerStack(tiny_llama, "graphs")
    assert stack.logits(stack.embed([5, 6, 7])).shape == (3, tiny_llama.vocab_size)
    from leap.core.decoding.batch import BatchDecoder

    batch = BatchDecoder(tiny_llama, "prompt-lookup", num_tokens=4)
    batch.stack = stack
    prompts = [[5, 6, 7, 5, 6, 7], [8, 9, 10]]
    out = batch.generate(prompts, max_new_tokens=12)
    assert stack.graphs.home is None  # the rows' prefill caches are eager: a session can still take the engine's
    plain = [SelfSpecDecoder(tiny_llama, None).generate(p, max_new_tokens=12).token_ids for p in prompts]
    assert [r.token_ids for r in out.rows] == plain
