"""Exit-head draft trees (issue 19, Kangaroo/DVI heads with EAGLE-2 trees): the layers below the exit run over a
batch of tree nodes with tree attention in the session's own cache - every node's exit logits are what a plain
causal pass over its root path gives - and are rolled back before the full model verifies, so output stays plain
decoding's and the layers from k on never run while drafting."""

from __future__ import annotations

import pytest
import torch

from leap.core import SelfSpecDecoder
from leap.core.config import LayerConfig
from leap.core.decoding.exit_tree import ExitTreeLayers
from leap.core.errors import SettingsError
from leap.core.modeling.layers import plan_for
from leap.heads.exit_drafter import ExitHeadDrafter

PROMPT = [5, 6, 7, 8, 9, 10, 11]


def _chain_exit_logits(model, exit, cfg, path):
    """The exit's logits after the pending token and ``path``, as a chain draft gets them: the prompt's context
    from the full model's prefill, then a plain causal pass of the layers below k (under ``cfg``)."""
    session = SelfSpecDecoder(model, None).start(PROMPT, max_new_tokens=8)
    stack, base = session.stack, len(PROMPT) - 1
    plan = plan_for([a.passes for a in cfg.actions], 0, exit.exit_layer)
    hidden = stack.run_layers(stack.embed([PROMPT[-1], *path]), plan, session.cache, base)
    return exit.exit_logits(hidden[:, -1:])[0]


@pytest.mark.parametrize("skip", [(), (1,)])
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_every_tree_node_gets_the_exit_logits_of_its_root_path(request, kind, skip):
    """Two children of the pending token, then one child under each: every node's logits equal a chain draft's along
    its own path (red when siblings see each other, or a node sits at the wrong
    position), and the layers below k are back at the committed length afterwards."""
    model = request.getfixturevalue(f"tiny_{kind}")
    k = 3
    exit = ExitHeadDrafter(layer=k, head="untrained")
    exit.use_model(model)
    cfg = LayerConfig.from_sets(model.num_layers, skip=list(skip))
    session = SelfSpecDecoder(model, None).start(PROMPT, max_new_tokens=8)
    base = len(session.tokens) - 1
    with torch.inference_mode():
        layers = ExitTreeLayers(session.stack, session.cache, base, session.tokens[base], cfg, exit)
        rows = {(): layers.root()[0]}
        first, (a, b) = layers.expand([20, 30], [0, 0])
        rows[(20,)], rows[(30,)] = first[0], first[1]
        second, _ = layers.expand([40, 50], [a, b])
        rows[(20, 40)], rows[(30, 50)] = second[0], second[1]
        layers.rollback()
        for path, logits in rows.items():
            want = _chain_exit_logits(model, exit, cfg, list(path))
            assert torch.allclose(logits, want, atol=1e-4), f"node {path}: max diff {(logits - want).abs().max()}"
    assert all(session.stack.cache_length(session.cache, i) == base for i in range(model.num_layers))
    executed = k - len([i for i in skip if i < k])
    assert layers.layer_passes == 5 * executed  # five node rows, each through the executed layers below k


@pytest.mark.parametrize("shape", ["eagle2", "opt"])
@pytest.mark.parametrize("skip", [(), (1,), (4,)])
def test_exit_trees_are_lossless_and_never_run_the_layers_from_k_while_drafting(tiny_any, shape, skip):
    """Greedy output equals plain decoding with trees (branching ones among them) drafted under the step's
    configuration below k; layers >= k run only in the prefill and once per verification; each tree step records
    the layer passes it cost."""
    prompt, k = [5, 6, 7, 8, 9, 10], 3
    plain = SelfSpecDecoder(tiny_any, None).generate(prompt, max_new_tokens=30)
    config = LayerConfig.from_sets(tiny_any.num_layers, skip=list(skip)) if skip else None
    drafter = ExitHeadDrafter(layer=k, head="untrained", shape=shape, width=2, num_tokens=3, tree_nodes=6)
    decoder = SelfSpecDecoder(tiny_any, config, drafter=drafter)
    assert decoder.costs is not None  # calibrated (it runs the layers) before the hooks count
    calls = [0] * tiny_any.num_layers
    hooks = [layer.register_forward_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
             for i, layer in enumerate(tiny_any.layers)]
    try:
        out = decoder.generate(prompt, max_new_tokens=30)
    finally:
        for h in hooks:
            h.remove()
    assert out.token_ids == plain.token_ids
    assert calls[k:] == [1 + len(out.steps)] * (tiny_any.num_layers - k), calls
    below = k - len([i for i in skip if i < k])
    drafted = [s for s in out.steps if s.drafted]
    assert all(s.layer_passes >= below and s.layer_passes % below == 0 for s in drafted)
    if shape == "eagle2":  # (OPT-Tree's cut may keep nothing on a random tiny model)
        assert any(s.drafted > s.layer_passes // below for s in drafted), "no tree had more nodes than depths"
    assert out.config == f"drafter:exit-head@{k}" + (f"+{config}" if skip and min(skip) < k else "")


def test_exit_tree_settings_are_checked():
    with pytest.raises(SettingsError, match="shape"):
        ExitHeadDrafter(head="untrained", shape="star")
    with pytest.raises(SettingsError, match="width"):
        ExitHeadDrafter(head="untrained", shape="eagle2", width=0)
