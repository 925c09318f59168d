"""Contract every registered redundancy metric passes (parametrised over the registry)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from leap.core import SelfSpecDecoder
from leap.core.modeling.trace import capture_trace
from leap.redundancy.base import RedundancyMetric, compute_metrics, make_metric, redundancy_metrics
from leap.redundancy.metrics.ear_gain import expected_accept_lengths
from tests.tiny import tiny_model

PROMPT = list(range(4, 40))


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", eos_token_id=None)


@pytest.fixture(scope="module")
def identity_model():
    """Layer 3's output projections zeroed: the layer passes its input through unchanged."""
    m = tiny_model("qwen2", eos_token_id=None)
    layer = m.layers[3]
    with torch.no_grad():
        for proj in (layer.self_attn.o_proj, layer.mlp.down_proj):
            proj.weight.zero_()
            packed = getattr(proj, "_packed_weight", None)
            if packed is not None:
                proj._packed_weight = proj.weight.detach().to_mkldnn()
    return m


@pytest.mark.parametrize("name", redundancy_metrics.names())
def test_shape_finiteness_and_direction(model, name):
    metric = make_metric(name)
    assert isinstance(metric, RedundancyMetric) and isinstance(metric.higher_is_redundant, bool)
    assert (redundancy_metrics.get(name).__doc__ or "").strip(), "metrics document what they measure"
    trace = capture_trace(model, PROMPT, positions=8)
    values = np.asarray(metric.compute(trace))
    assert values.shape == (model.num_layers,)
    assert np.isfinite(values).all()
    sign = 1 if metric.higher_is_redundant else -1
    assert np.allclose(metric.redundancy(trace), sign * values)


@pytest.mark.parametrize("name", redundancy_metrics.names())
def test_mean_over_prompts_is_invariant_to_batch_order(model, name):
    a = capture_trace(model, PROMPT, positions=8)
    b = capture_trace(model, PROMPT[5:] + [7, 8], positions=8)
    assert np.allclose(compute_metrics([a, b], [name])[name], compute_metrics([b, a], [name])[name])


@pytest.mark.parametrize("name", redundancy_metrics.names())
def test_decoder_prefill_trace_gives_the_same_metric(model, name):
    """Metrics from the decoder's own prefill equal those from a separate prefill of the same tokens."""
    session = SelfSpecDecoder(model, None).start(PROMPT, max_new_tokens=2, trace_positions=8)
    own = capture_trace(model, PROMPT[:-1], positions=8)  # the decoder prefills all but the pending token
    assert np.allclose(make_metric(name).compute(session.trace), make_metric(name).compute(own), atol=1e-5)


@pytest.mark.parametrize("name", [n for n in redundancy_metrics.names() if make_metric(n).identity_is_most_redundant])
def test_identity_layer_is_most_redundant(identity_model, name):
    metric = make_metric(name)
    scores = metric.redundancy(capture_trace(identity_model, PROMPT, positions=8))
    assert int(np.argmax(scores)) == 3


def test_identity_layer_adds_no_acceptance(identity_model):
    trace = capture_trace(identity_model, PROMPT, positions=8)
    ear = expected_accept_lengths(trace)
    assert ear[3] == pytest.approx(ear[2], abs=1e-5)
    assert make_metric("ear-gain").compute(trace)[3] == pytest.approx(0.0, abs=1e-5)
    assert ear[-1] == pytest.approx(8.0)  # the last layer drafts exactly what the model predicts


@pytest.mark.parametrize("chunk", [5, 64, 100_000])
def test_ear_is_the_logit_lens_definition(model, chunk):
    """The streamed log-sum-exp gives LEAP's EAR_l = sum_t prod_{s<=t} min(1, p_final(x_s) / p_l(x_s)),
    x_s = layer l's logit-lens argmax, computed here the dense way, whatever the vocabulary chunking."""
    trace = capture_trace(model, PROMPT, positions=8)
    with torch.inference_mode():
        outs = torch.stack([trace.layer_output(l) for l in range(model.num_layers)])
        p = torch.softmax(model.lm_head(model.norm(outs)).double(), dim=-1)  # [L, N, V]
        x = p.argmax(dim=-1, keepdim=True)
        alpha = (p[-1].expand_as(p).gather(-1, x) / p.gather(-1, x)).clamp(max=1.0).squeeze(-1)
        reference = torch.cumprod(alpha, dim=1).sum(dim=1).numpy()
    assert reference.min() < 7.0  # the tiny random model's early layers disagree with its last one
    assert np.allclose(expected_accept_lengths(trace, chunk=chunk), reference, atol=1e-4)


def test_per_position_metrics_are_invariant_to_position_order(model):
    trace = capture_trace(model, PROMPT, positions=8)
    perm = [3, 0, 7, 1, 6, 2, 5, 4]
    shuffled = type(trace)([h[perm] for h in trace.hidden], trace.keys, [trace.positions[i] for i in perm], model)
    for name in ("residual-ratio", "cosine", "attention-entropy"):
        assert np.allclose(make_metric(name).compute(trace), make_metric(name).compute(shuffled), atol=1e-6)


@pytest.fixture(scope="module")
def deep_trace():
    return capture_trace(tiny_model("llama", layers=12, eos_token_id=None), PROMPT, positions=8)


@pytest.mark.parametrize("role", ["zone_metric", "group_metric"])
@pytest.mark.parametrize("name", redundancy_metrics.names())
def test_every_metric_can_drive_zones_and_groups(deep_trace, name, role):
    """Any registered metric in either of LEAP's roles gives a space that obeys the zone rules."""
    from leap.redundancy.build import SpaceSettings, space_from_traces
    from leap.redundancy.zones import Zone

    space = space_from_traces(deep_trace, SpaceSettings(**{role: name}))
    zones = space.zones
    assert zones[:3] == [Zone.EARLY] * 3 and zones[-2:] == [Zone.FINAL] * 2
    assert [layer for group in space.groups for layer in group] == list(range(12))  # a partition, in order
    assert all(len({zones[l] for l in group}) == 1 for group in space.groups)  # groups never cross zones
    importance = make_metric(name).importance(compute_metrics(deep_trace, [name])[name])
    assert importance.shape == (12,) and np.isfinite(importance).all()


def test_the_zone_metric_changes_the_zones(deep_trace):
    """Negative control: the role is really filled by the named metric (cosine gives other zones than R here)."""
    from leap.redundancy.build import SpaceSettings, space_from_traces

    default = space_from_traces(deep_trace)
    others = {n: space_from_traces(deep_trace, SpaceSettings(zone_metric=n, group_metric=n)).zones
              for n in redundancy_metrics.names() if n not in ("residual-ratio", "ear-gain")}
    assert any(z != default.zones for z in others.values())
