"""The graph engine with real CUDA graphs (``pytest -m gpu``; skipped without CUDA): captured and replayed on a tiny
model, every forward of random sessions equals leap's eager layers, and float32 decoding through it is token-identical
to eager decoding; so are batches on static buffers (``BatchDecoder(graphs=True)``). Red on a planted stale input
buffer (benchmarks/gpu_graphs.sh runs it on a lent GPU machine)."""

from __future__ import annotations

import pytest
import torch

from leap.core import LayerConfig, SelfSpecDecoder
from leap.core.modeling.layers import LayerStack
from leap.core.modeling.model import wrap_model
from tests.core.modeling.test_static_cache import CLOSE, _replay
from tests.tiny import same_or_float_tie, tiny_hf_model, tiny_tokenizer

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def cuda_llama():
    return wrap_model(tiny_hf_model("llama", eos_token_id=None).to("cuda"), tiny_tokenizer(False), name="tiny-cuda")


SESSIONS = [  # (prefill, steps): drafts that skip and repeat, chains and trees of several widths, rollbacks
    (7, [([1, 0, 0, 1, 1, 1], 2, 3, None, 1), ([1, 1, 2, 1, 0, 1], 3, 5, [0, 0, 1, 2], [1, 3]),
         ([1, 1, 1, 1, 1, 1], 1, 6, None, 5)]),
    (12, [([0, 1, 1, 2, 2, 1], 3, 4, [0, 1, 1], [1, 3]), ([1, 0, 1, 0, 1, 0], 2, 2, None, 0),
          ([1, 1, 1, 1, 1, 2], 1, 1, None, 0)]),
]


@pytest.mark.parametrize("prefill, steps", SESSIONS)
def test_every_replayed_forward_equals_the_eager_layers_on_cuda(cuda_llama, prefill, steps):
    ids = list(range(4, 4 + prefill + 40))
    expected = _replay(LayerStack(cuda_llama, "eager"), prefill, steps, ids)
    stack = LayerStack(cuda_llama, "graphs")
    got = _replay(stack, prefill, steps, ids)
    assert stack.graphs.graphs and not stack.graphs.broken, stack.graphs.describe()
    for i, (a, b) in enumerate(zip(got, expected)):
        assert torch.allclose(a, b, **CLOSE), f"forward {i}: {(a - b).abs().max().item():.3g}"


@pytest.mark.parametrize("config, drafter", [(None, None), ("skip", None), ("repeat", None), (None, "stand"),
                                             (None, "suffix")])
def test_float32_decoding_through_graphs_is_lossless_and_eager_decoding(cuda_llama, config, drafter):
    """Speculative decoding through the graphs is plain decoding through them, token for token; and that is eager
    plain decoding (up to a float32 tie: attention over the whole buffer sums in another order)."""
    cfg = {None: None, "skip": LayerConfig.from_sets(6, skip=[2, 3]),
           "repeat": LayerConfig.from_sets(6, skip=[1], repeat=[4])}[config]
    prompt = [5, 6, 7, 5, 6, 7, 8, 9, 5, 6]
    plain = SelfSpecDecoder(cuda_llama, None, engine="graphs").generate(prompt, max_new_tokens=32).token_ids
    decoder = SelfSpecDecoder(cuda_llama, cfg, drafter=drafter, engine="graphs")
    assert decoder.generate(prompt, max_new_tokens=32).token_ids == plain
    assert not decoder.stack.graphs.broken
    eager = SelfSpecDecoder(cuda_llama, None, engine="eager").generate(prompt, max_new_tokens=32).token_ids
    assert same_or_float_tie(cuda_llama, prompt, plain, eager)


@pytest.mark.parametrize("drafter, config", [(None, None), ("suffix", None), (None, "skip")])
def test_float32_batches_through_batch_graphs_are_each_prompt_decoded_alone(cuda_llama, drafter, config):
    """A batch on static buffers with every layer a real CUDA graph (``BatchDecoder(graphs=True)``): no graph fails its
    check, and each row is its prompt decoded alone (up to a float32 tie), through rows that leave and packing."""
    from leap.core.decoding.batch import BatchDecoder

    cfg = None if config is None else LayerConfig.from_sets(6, skip=[2, 3])
    batch = [[5, 6, 7, 5, 6, 7, 8, 9, 5, 6], [11, 4], [6, 6, 6, 6, 6, 6, 6], [9]]
    decoder = BatchDecoder(cuda_llama, drafter, layer_config=cfg, num_tokens=4, compact_min=0, compact_share=0,
                           graphs=True)
    out = decoder.generate(batch, max_new_tokens=24)
    engine = decoder._engines[len(batch)]
    assert engine.graphs and not engine.broken
    for p, row in zip(batch, out.rows):
        alone = SelfSpecDecoder(cuda_llama, None, engine="eager").generate(p, max_new_tokens=24).token_ids
        assert same_or_float_tie(cuda_llama, p, row.token_ids, alone)
