"""Low-precision layer copies (the LOW action): quantisation error bounds, the draft really runs them,
the verifier never does. Greedy identity under LOW configs is covered by the decoder's property tests
(their configurations draw from every LayerAction)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from leap.core import LayerConfig, SelfSpecDecoder
from leap.core.errors import SettingsError
from leap.core.modeling.layers import LayerStack
from leap.core.modeling.low_bit_layers import WeightOnlyLinear, low_bit_layer, quantize_layer, replacements


@given(out=st.integers(1, 40), groups=st.integers(1, 4), bits=st.sampled_from([8, 4]), seed=st.integers(0, 99),
       scale=st.floats(1e-3, 1e3))
def test_dequantised_weights_are_within_half_a_step(out, groups, bits, seed, scale):
    torch.manual_seed(seed)
    linear = torch.nn.Linear(32 * groups, out)
    linear.weight.data *= scale
    q = WeightOnlyLinear(linear, bits)
    err = (q.dequantized() - linear.weight).abs()
    # round-to-nearest: each weight is at most half a quantisation step from its original
    step = q.scale[:, None] if bits == 8 else q.scale.repeat_interleave(32, dim=1)
    assert bool((err <= 0.5 * step * (1 + 1e-5) + 1e-12).all())
    levels = 127 if bits == 8 else 7
    assert int(q.qweight.abs().max()) <= levels + (1 if bits == 4 else 0)
    assert int(q.qweight.abs().max()) >= levels  # the scale uses the whole range (the largest |w| maps to it)


@pytest.mark.parametrize("bits", [8, 4])
def test_the_product_is_the_dequantised_weights_product(bits):
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48)
    q = WeightOnlyLinear(linear, bits)
    x = torch.randn(3, 5, 64)
    expected = torch.nn.functional.linear(x, q.dequantized(), linear.bias)
    torch.testing.assert_close(q(x), expected, rtol=1e-4, atol=1e-4)
    # and it is an approximation of the original: close, not equal
    assert 0 < (q(x) - linear(x)).abs().max() < 0.2 * linear(x).abs().max()


def test_bad_settings_name_the_problem():
    with pytest.raises(SettingsError, match="bits in"):
        WeightOnlyLinear(torch.nn.Linear(32, 4), bits=3)
    with pytest.raises(SettingsError, match="group_size"):
        WeightOnlyLinear(torch.nn.Linear(33, 4), bits=4)
    with pytest.raises(SettingsError, match="low_bits"):
        SelfSpecDecoder.__init__(object.__new__(SelfSpecDecoder), None, low_bits=2)


def test_a_quantised_layer_shares_nothing_it_could_change(tiny_llama):
    layer = tiny_llama.layers[2]
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    copy = quantize_layer(layer, 8)
    assert not any(isinstance(m, torch.nn.Linear) for m in copy.modules())
    assert sum(isinstance(m, WeightOnlyLinear) for m in copy.modules()) == 7  # q k v o gate up down
    for k, v in layer.state_dict().items():
        assert torch.equal(v, before[k])  # the original layer is untouched
    assert low_bit_layer(tiny_llama, 2, 8) is low_bit_layer(tiny_llama, 2, 8)  # cached per (layer, bits)
    assert low_bit_layer(tiny_llama, 2, 4) is not low_bit_layer(tiny_llama, 2, 8)


def test_the_draft_runs_the_low_precision_copy_and_only_for_low_layers(tiny_llama):
    stack = LayerStack(tiny_llama)
    ids = [5, 9, 14, 20, 7]
    config = LayerConfig.parse("EEQQEE")
    assert set(replacements(tiny_llama, config)) == {2, 3}
    with torch.inference_mode():
        full = stack.run_layers(stack.embed(ids), stack.full_plan, stack.new_cache(8), 0)
        low = stack.run_layers(stack.embed(ids), stack.full_plan, stack.new_cache(8), 0,
                               replace=replacements(tiny_llama, config))
        none = stack.run_layers(stack.embed(ids), stack.full_plan, stack.new_cache(8), 0,
                                replace=replacements(tiny_llama, LayerConfig.parse("EEEEEE")))
    assert torch.equal(none, full)
    diff = (low - full).abs().max()
    assert 0 < diff < 0.1 * full.abs().max()  # a different, close computation


def test_low_layers_draft_well_and_verification_stays_exact(tiny_llama):
    prompt = [5, 9, 14, 20, 7, 11]
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=40)
    low = SelfSpecDecoder(tiny_llama, LayerConfig.parse("EQQQQE"), "fixed", policy_kwargs={"k": 4}).generate(
        prompt, max_new_tokens=40)
    skip = SelfSpecDecoder(tiny_llama, LayerConfig.parse("ESSSSE"), "fixed", policy_kwargs={"k": 4}).generate(
        prompt, max_new_tokens=40)
    assert low.token_ids == plain.token_ids == skip.token_ids
    # int8 weights keep the draft close to the target: far more accepted than with the same layers skipped
    assert low.mean_accepted > 2.5 > skip.mean_accepted
