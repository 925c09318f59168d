"""Sliding-window attention in leap's own layer path (Mistral; Qwen2 with use_sliding_window).

The window (8 tokens) is shorter than every test sequence, so a path that ignored it would differ.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core.config import LayerConfig
from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.modeling.layers import LayerStack
from tests.tiny import tiny_model

KINDS = ["mistral", "qwen2-window"]


@pytest.fixture(scope="module", params=KINDS)
def windowed(request):
    return tiny_model(request.param, eos_token_id=None)


def _layerwise_logits(model, ids, chunks):
    """Logits of ``ids`` fed through leap's stack in chunks (prefill, then q-token pieces)."""
    stack = LayerStack(model)
    cache = stack.new_cache()
    out, start = [], 0
    with torch.inference_mode():
        for size in chunks:
            piece = ids[start: start + size]
            hidden = stack.run_layers(stack.embed(piece), stack.full_plan, cache, start)
            out.append(stack.logits(hidden))
            start += size
    return torch.cat(out)


@pytest.mark.parametrize("chunks", [[24], [10, 1, 1, 4, 8], [3, 5, 16]])
def test_layerwise_forward_matches_transformers_beyond_the_window(windowed, chunks):
    ids = list(range(5, 5 + sum(chunks)))
    with torch.inference_mode():
        reference = windowed.hf_model(torch.tensor([ids])).logits[0].float()
        full_attention = _layerwise_logits(windowed, ids, [len(ids)])
    assert windowed.config.sliding_window < len(ids)
    torch.testing.assert_close(_layerwise_logits(windowed, ids, chunks), reference, rtol=1e-4, atol=1e-4)
    assert torch.allclose(full_attention, reference, atol=1e-4)


def test_the_window_changes_the_logits(windowed):
    """Negative control: the same weights without the window give other logits past the window."""
    ids = list(range(5, 29))
    stack = LayerStack(windowed)
    saved, stack.window = stack.window, None
    with torch.inference_mode():
        hidden = stack.run_layers(stack.embed(ids), stack.full_plan, stack.new_cache(), 0)
        unwindowed = stack.logits(hidden)
    stack.window = saved
    with torch.inference_mode():
        reference = windowed.hf_model(torch.tensor([ids])).logits[0].float()
    assert not torch.allclose(unwindowed[10:], reference[10:], atol=1e-3)


@settings(max_examples=10)
@given(skip=st.sets(st.integers(1, 4), max_size=3), prompt=st.lists(st.integers(4, 96), min_size=2, max_size=12),
       k=st.integers(1, 5))
def test_greedy_speculative_equals_plain_with_sliding_window(windowed, skip, prompt, k):
    config = LayerConfig.from_sets(windowed.num_layers, skip=sorted(skip))
    plain = SelfSpecDecoder(windowed, None).generate(prompt, max_new_tokens=20)
    spec = SelfSpecDecoder(windowed, config, "fixed", policy_kwargs={"k": k}).generate(prompt, max_new_tokens=20)
    assert spec.token_ids == plain.token_ids


def test_plain_decoding_matches_transformers_generate(windowed):
    prompt = [7, 8, 9, 10, 11, 12]
    ours = SelfSpecDecoder(windowed, None).generate(prompt, max_new_tokens=20).token_ids
    with torch.inference_mode():
        theirs = windowed.hf_model.generate(torch.tensor([prompt]), max_new_tokens=20, do_sample=False,
                                            min_new_tokens=20)[0, len(prompt):].tolist()
    assert ours == theirs


def test_tree_verification_applies_the_window_at_each_nodes_own_position(windowed):
    """A draft tree past the window: every row's logits through leap's stack (tree positions and mask)
    equal transformers' logits of that row's own root path. A window computed from row order instead of
    the nodes' depths turns this red (the wide tree's late rows sit at shallow positions)."""
    from leap.core.trees.draft_tree import DraftTree

    window = windowed.config.sliding_window
    context = list(range(5, 5 + window + 4))  # the cache already reaches past the window
    tree = DraftTree([40, 41, 42, 43, 44, 45, 46, 47, 48], parents=[0, 0, 0, 0, 0, 0, 1, 7, 8])
    root = 60
    stack = LayerStack(windowed)
    cache = stack.new_cache()
    start = len(context)
    with torch.inference_mode():
        stack.run_layers(stack.embed(context), stack.full_plan, cache, 0)
        mask = tree.attention_mask(start, stack.dtype, stack.device)
        hidden = stack.run_layers(stack.embed([root, *tree.tokens]), stack.full_plan, cache, start,
                                  positions=tree.positions(start), mask=mask)
        logits = stack.logits(hidden)
        for row in range(len(tree) + 1):
            path = [root] + [tree.tokens[r - 1] for r in tree.path(row)]
            reference = windowed.hf_model(torch.tensor([context + path])).logits[0, -1].float()
            torch.testing.assert_close(logits[row].float(), reference, rtol=1e-4, atol=1e-4)
