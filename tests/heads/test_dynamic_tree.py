"""EAGLE-2's dynamic tree (leap.heads.dynamic_tree) and the eagle drafter's trees: the expansion feeds the
head only the ``width`` most valuable nodes of each layer, reranking keeps the most valuable nodes as a
subtree in value order, the drafter's tree pass sees exactly what a chain pass along the same path sees (its
sampled skeleton trees draw every node from that pass's q), and decoding with trees is plain greedy output."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core import SelfSpecDecoder
from leap.core.runtime.costs import Calibration
from leap.core.trees.opt_tree import budget_by_expected_acceptance
from leap.core.verify.sampling import SamplingSettings
from leap.heads.drafter import Eagle
from leap.heads.dynamic_tree import dynamic_tree
from leap.heads.head import FeatureHead

VOCAB = 7


def _table(seed: int):
    """A deterministic draft distribution for every path: probabilities over VOCAB tokens, most likely first."""
    def children(path: tuple[int, ...]):
        gen = torch.Generator().manual_seed(hash((seed, path)) % (2 ** 31))
        probs = torch.softmax(torch.randn(VOCAB, generator=gen) * 2.0, dim=0)
        top = torch.sort(probs, descending=True)
        return top.indices.tolist(), top.values.tolist()
    return children


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), depth=st.integers(1, 5), width=st.integers(1, 4), max_nodes=st.integers(1, 24))
def test_expansion_and_reranking_follow_eagle2(seed, depth, width, max_nodes):
    children = _table(seed)
    paths: list[tuple[int, ...]] = []  # candidate index -> its path
    calls: list[list[tuple[int, ...]]] = []
    values: dict[tuple[int, ...], float] = {}

    def record(path, ids, probs, value):
        for t, p in list(zip(ids, probs))[:width]:
            paths.append(path + (t,))
            values[path + (t,)] = value * p

    first = children(())
    record((), *first, 1.0)

    def expand(layer, cands):
        layer_paths = [paths[i] for i in layer]
        calls.append(layer_paths)
        out = [children(p) for p in layer_paths]
        for p, (ids, probs) in zip(layer_paths, out):
            record(p, ids, probs, values[p])
        return out

    tree = dynamic_tree(first, expand, depth=depth, width=width, max_nodes=max_nodes)
    # expansion: each layer fed is the `width` most valuable nodes of the layer before (no stop tokens here)
    newest = [p for p in paths if len(p) == 1]
    for d, fed in enumerate(calls, start=2):
        assert fed == sorted(newest, key=lambda p: -values[p])[:width]
        newest = [p for p in paths if len(p) == d]
    assert len(calls) == depth - 1
    # reranking: the max_nodes most valuable candidates, rows in value order, each path's value exact
    got = [tuple(tree.tokens[r - 1] for r in tree.path(row)) for row in range(1, len(tree) + 1)]
    assert sorted(values.values(), reverse=True)[:max_nodes] == pytest.approx(sorted(
        (values[p] for p in got), reverse=True))
    assert tree.scores == pytest.approx([values[p] for p in got])
    assert all(a >= b for a, b in zip(tree.scores, tree.scores[1:]))
    assert len(got) == min(max_nodes, len(paths)) and tree.depth <= depth


def test_stop_tokens_are_never_expanded_and_costs_cut_the_tree():
    children = _table(1)
    first = children(())
    stop = first[0][0]  # the most likely first token ends the sequence
    fed = []

    def expand(layer, cands):
        fed.extend(cands[i].token for i in layer if cands[i].depth == 1)
        return [children((cands[i].token,)) for i in layer]

    tree = dynamic_tree(first, expand, depth=3, width=3, max_nodes=30, stop_tokens={stop})
    assert stop not in fed and fed  # the others were expanded
    assert not tree.children(tree.children(0)[stop])  # the stop token is a leaf
    # a steep verification curve: OPT-Tree's cut keeps exactly the prefix that maximises expected speed
    costs = Calibration(key={}, step_s=1.0, verify_curve={1: 1.0, 2: 1.2, 4: 1.6, 8: 2.6, 16: 5.0, 32: 10.0},
                        layer_cost=0.03, head_cost=0.1)
    full = dynamic_tree(first, expand, depth=3, width=3, max_nodes=30)
    cut = dynamic_tree(first, expand, depth=3, width=3, max_nodes=30, costs=costs)
    n = budget_by_expected_acceptance(full.scores, costs)
    assert 0 < n < len(full) and len(cut) == n and cut.tokens == full.tokens[:n]


def _chain_probs(drafter: Eagle, tokens: list[int], path: list[int]) -> torch.Tensor:
    """The head's draft distribution after ``tokens + path``, by the chain pass (one token at a time)."""
    with torch.inference_mode():
        feature = drafter._first(tokens)
        n = len(tokens)
        drafter._fed = n - 1
        for k, token in enumerate(path):
            feature = drafter._step(feature.view(1, -1), [token], n - 1 + k)
        probs = torch.softmax(drafter._lm(feature.view(1, 1, -1))[0, 0].float(), dim=-1)
        drafter._restart_cache(n - 1)
    return probs


def _attending_head(model) -> FeatureHead:
    """An untrained head whose layer matters: as initialised its residual outputs are zero, so attention
    masks and positions would not change what it predicts."""
    head = FeatureHead.from_model(model)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(0)
        for out in (head.layer.self_attn.o_proj, head.layer.mlp.down_proj):
            out.weight.copy_(torch.randn(out.weight.shape, generator=gen) * 0.5)
    return head


def test_tree_pass_sees_what_a_chain_pass_sees(tiny_llama):
    """Every node's value is the product of the chain pass's probabilities along its path: a wrong tree
    mask (a node seeing a sibling) or position turns this red."""
    model = tiny_llama
    head = _attending_head(model)
    drafter = Eagle(num_tokens=3, head=head, shape="eagle2", width=3, tree_nodes=21)
    drafter.use_model(model)
    tokens = [5, 6, 7, 8, 9, 10, 11]
    drafter.begin(tokens)
    with torch.inference_mode():
        states = model.base(input_ids=torch.tensor([tokens])).last_hidden_state[0]
    drafter.observe_features(0, states[:-1])
    tree = drafter.propose_tree(tokens, 3)
    assert len(tree) == 21 and tree.depth == 3  # 3 + 9 + 9: every candidate drafted
    for row in range(1, len(tree) + 1):
        path = [tree.tokens[r - 1] for r in tree.path(row)]
        value = math.prod(float(_chain_probs(drafter, tokens, path[:k])[t]) for k, t in enumerate(path))
        assert tree.scores[row - 1] == pytest.approx(value, rel=1e-4)
    assert drafter._cache.layers[0].length == len(tokens) - 1  # no draft entry outlives the step


@pytest.mark.parametrize("shape", ["siblings", "delayed"])
def test_sampled_skeleton_trees_draw_each_node_from_the_chain_pass_q(tiny_llama, shape):
    """A sampled skeleton tree: every node was drawn from the head's q after its root path as the chain pass
    gives it (top-k, renormalised, earlier siblings removed) - red when a node's pass sees a sibling or sits at the
    wrong position; the draws are what Traversal Verification reads."""
    model = tiny_llama
    drafter = Eagle(num_tokens=3, head=_attending_head(model), shape=shape, width=3, top_k=5, trunk=1, branches=3,
                    branch_len=2)
    drafter.use_model(model)
    drafter.use_sampling(SamplingSettings(1.0, 1.0))
    tokens = [5, 6, 7, 8, 9, 10, 11]
    drafter.begin(tokens)
    with torch.inference_mode():
        states = model.base(input_ids=torch.tensor([tokens])).last_hidden_state[0]
    drafter.observe_features(0, states[:-1])
    tree = drafter.propose_sampled_tree(tokens, 8, torch.Generator().manual_seed(0))
    assert len(tree) == len(drafter.skeleton)  # every skeleton node was filled
    for row in range(1, len(tree) + 1):
        parent = tree.parents[row - 1]
        path = [tree.tokens[r - 1] for r in tree.path(parent)] if parent else []
        top = torch.topk(_chain_probs(drafter, tokens, path), 5)
        q = {int(t): float(v) for t, v in zip(top.indices, top.values / top.values.sum())}
        for earlier in sorted(tree.children(parent).values()):
            if earlier == row:
                break
            q.pop(tree.tokens[earlier - 1])  # drawn without replacement: earlier siblings are out
        mass = sum(q.values())
        assert tree.draws[row - 1] == pytest.approx({t: v / mass for t, v in q.items()}, rel=1e-4), row
    assert drafter._cache.layers[0].length == len(tokens) - 1  # no draft entry outlives the step


@pytest.mark.parametrize("shape", ["eagle2", "opt"])
def test_eagle_trees_are_greedy_lossless(tiny_any, shape):
    prompt = [5, 6, 7, 8, 9, 10]
    plain = SelfSpecDecoder(tiny_any, None).generate(prompt, max_new_tokens=40)
    drafter = Eagle(num_tokens=3, head="untrained", shape=shape, width=3, tree_nodes=10)
    spec = SelfSpecDecoder(tiny_any, None, drafter=drafter).generate(prompt, max_new_tokens=40)
    assert spec.token_ids == plain.token_ids
    assert spec.draft_tokens_proposed > 0


def test_drafting_reads_positions_as_training_does(tiny_llama):
    """The drafter's cached, incremental passes give the training pass's predicted features (same features,
    tokens and RoPE positions): an inconsistent position between passes turns this red (a uniform shift
    cannot matter: RoPE is relative)."""
    from leap.heads.train import teacher_forced

    model = tiny_llama
    head = _attending_head(model)
    tokens = [5, 6, 7, 8, 9, 10, 11, 12, 13]
    with torch.inference_mode():
        states = model.norm(model.base(input_ids=torch.tensor([tokens])).last_hidden_state)
        expected = teacher_forced(model, head, torch.tensor([tokens]), states, None)[0]  # f_hat at positions 1..
    drafter = Eagle(num_tokens=2, head=head)
    drafter.use_model(model)
    drafter.begin(tokens)
    drafter.observe_features(0, states[0])
    for m in (4, 5, 9):  # the cache grows by 2, then 1, then 4 verified entries
        with torch.inference_mode():
            got = drafter._first(tokens[:m])
        drafter._fed = m - 1
        assert torch.allclose(got, expected[m - 2], atol=1e-5)
