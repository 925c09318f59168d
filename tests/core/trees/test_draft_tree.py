"""Draft trees: structure, tree attention against plain causal forwards, best-first growth, and
losslessness of tree verification (greedy: token identity; sampling: the exact target distribution)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from leap.core import SelfSpecDecoder
from leap.core.trees.draft_tree import DraftTree, best_first_tree
from leap.core.drafters import Drafter, PromptLookup, SuffixDrafter, TokenRecycling
from leap.core.modeling.layers import LayerStack


@st.composite
def trees(draw, vocab: int = 97, max_nodes: int = 10) -> DraftTree:
    tree = DraftTree()
    for _ in range(draw(st.integers(0, max_nodes))):
        tree.add(draw(st.integers(0, len(tree))), draw(st.integers(0, vocab - 1)))
    return tree


@given(tree=trees(), past=st.integers(0, 5))
def test_mask_and_positions_follow_the_ancestry(tree, past):
    mask = tree.attention_mask(past, torch.float32)[0, 0]
    rows = len(tree) + 1
    assert mask.shape == (rows, past + rows)
    assert (mask[:, :past] == 0).all()  # the cached context is visible to every row
    for row in range(rows):
        ancestors = {0, *tree.path(row)}
        visible = {j for j in range(rows) if mask[row, past + j] == 0}
        assert visible == ancestors
        assert tree.positions(past)[row] == past + len(tree.path(row))
    assert tree.is_chain == all(len(tree.children(r)) <= 1 for r in range(rows))


def test_the_mask_is_built_on_the_device_not_the_host():
    """Issue 20: nothing the context's length is made on the host per step (the old mask was built there
    and copied, O(context)); ``meta`` stands in for a GPU."""
    from torch.overrides import TorchFunctionMode

    class HostAllocations(TorchFunctionMode):
        largest = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor) and out.device.type == "cpu":
                self.largest = max(self.largest, out.numel())
            return out

    tree = DraftTree([5, 6, 7, 8], [0, 1, 1, 0])
    with HostAllocations() as seen:
        mask = tree.attention_mask(100_000, torch.float16, "meta")
    assert mask.device.type == "meta" and mask.shape == (1, 1, 5, 100_005)
    assert seen.largest <= 25, f"a host tensor of {seen.largest} elements per step"


def test_chain_layout_and_duplicate_children_are_refused():
    chain = DraftTree.chain([5, 6, 7])
    assert chain.is_chain and chain.parents == [0, 1, 2] and chain.first_chain() == [5, 6, 7]
    with pytest.raises(ValueError, match="twice"):
        DraftTree([5, 5], [0, 0])
    with pytest.raises(ValueError, match="does not exist"):
        DraftTree([5], [3])


@given(tree=trees(vocab=50, max_nodes=8), prompt=st.lists(st.integers(0, 96), min_size=2, max_size=12))
def test_tree_attention_equals_a_causal_forward_along_each_path(tiny_any, tree, prompt):
    """Each row's logits from one tree-attention forward = the last logits of a plain forward over
    prompt + that row's root path."""
    stack = LayerStack(tiny_any)
    base = len(prompt) - 1
    with torch.inference_mode():
        cache = stack.new_cache()
        stack.run_layers(stack.embed(prompt[:-1]), stack.full_plan, cache, 0)
        hidden = stack.run_layers(stack.embed([prompt[-1], *tree.tokens]), stack.full_plan, cache, base,
                                  positions=tree.positions(base), mask=tree.attention_mask(base, stack.dtype))
        ours = stack.logits(hidden)
        for row in range(len(tree) + 1):
            ids = prompt + [tree.tokens[r - 1] for r in tree.path(row)]
            ref = tiny_any.hf_model(torch.tensor([ids])).logits[0, -1].float()
            assert torch.allclose(ours[row], ref, atol=1e-4, rtol=1e-4), row


def test_best_first_tree_respects_budget_depth_and_min_prob():
    def expand(state):  # every node: token 0 with p=0.6, token 1 with 0.3, token 2 with 0.1
        return [(0, 0.6, state + 1), (1, 0.3, state + 1), (2, 0.1, state + 1)]

    tree = best_first_tree(expand, 0, max_nodes=5, max_depth=3, min_prob=0.05)
    assert len(tree) == 5 and tree.depth <= 3
    # path probabilities: 0.6, 0.36 (0,0), 0.3, 0.216 (0,0,0), 0.18 (0,1) -> these five, best first
    assert tree.first_chain() == [0, 0, 0]
    assert sorted(tree.children(0)) == [0, 1]
    assert best_first_tree(expand, 0, max_nodes=50, max_depth=2, min_prob=0.2).tokens == [0, 0, 1]  # 0.6, 0.36, 0.3


def test_drafters_build_trees_within_their_budget():
    tokens = [1, 2, 3, 1, 2, 4, 1, 2, 5, 1, 2]
    pld = PromptLookup(max_ngram=2, num_tokens=1, tree_nodes=4)
    assert sorted(pld.propose_tree(tokens, 10).children(0)) == [3, 4, 5]  # the continuations of [1, 2]
    pld = PromptLookup(max_ngram=2, num_tokens=3, tree_nodes=4)
    tree = pld.propose_tree(tokens, 10)
    assert len(tree) == 4 and tree.first_chain() == PromptLookup(max_ngram=2, num_tokens=3).propose(tokens, 10)
    suffix = SuffixDrafter(tree_nodes=4, min_prob=0.0)
    stree = suffix.propose_tree(tokens, 10)
    assert 1 < len(stree) <= 4 and not stree.is_chain
    tr = TokenRecycling(top_k=3, tree_nodes=5)
    tr.observe([4], torch.tensor([[0.0, 3.0, 2.0, 1.0, -1.0]]))
    ttree = tr.propose_tree([4], 4)
    assert sorted(ttree.children(0)) == [1, 2, 3] and len(ttree) == 3  # token 4's top-3; 1, 2, 3 unobserved


def test_tree_steps_keep_the_cache_and_output_of_plain_decoding(tiny_llama):
    class FixedTree(Drafter):
        """Always the same branching tree (whatever the context), so most steps verify a tree."""

        name = "fixed-tree"

        def propose_tree(self, tokens, max_depth):
            tree = DraftTree()
            for path in ([tokens[-1], 5, 6], [7, 8], [tokens[-2] if len(tokens) > 1 else 9]):
                tree.add_path(path, max_depth=max_depth)
            return tree

    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5]
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=30)
    session = SelfSpecDecoder(tiny_llama, None, drafter=FixedTree()).start(prompt, max_new_tokens=30)
    while not session.done:
        record = session.step()
        assert record.drafted >= record.accepted
        assert {layer.get_seq_length() for layer in session.cache.layers} == {len(session.tokens) - 1}
    assert session.new_token_ids == plain.token_ids
