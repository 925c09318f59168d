from __future__ import annotations

import pytest
import torch
from torch import nn

from leap.core.modeling.fast_linear import OneDNNLinear, accelerate_linears, onednn_available

pytestmark = pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN")


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("rows", [1, 2, 3, 8, 17])
def test_matches_nn_linear(bias, rows):
    torch.manual_seed(0)
    lin = nn.Linear(48, 80, bias=bias)
    fast = OneDNNLinear(lin)
    x = torch.randn(1, rows, 48)
    with torch.inference_mode():
        assert torch.allclose(fast(x), lin(x), atol=1e-5, rtol=1e-5)
    assert fast.weight is lin.weight


def test_accelerate_replaces_only_float32_cpu_linears():
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4)), nn.Linear(4, 4).to(torch.bfloat16))
    assert accelerate_linears(model) == 2
    assert isinstance(model[0], OneDNNLinear) and isinstance(model[1][0], OneDNNLinear)
    assert isinstance(model[2], nn.Linear)


def test_falls_back_when_grad_is_enabled(monkeypatch):
    """Under autograd the packed oneDNN kernel (no backward) is never called: the plain linear runs and gradients
    flow; without grad the packed kernel runs (red when the fallback is dropped, or taken always)."""
    from leap.core.modeling import fast_linear

    lin = nn.Linear(4, 3)
    fast = OneDNNLinear(lin)
    packed = []
    kernel = torch.ops.mkldnn._linear_pointwise if fast_linear._POINTWISE else torch._C._nn.mkldnn_linear
    spy = lambda *a: packed.append(1) or kernel(*a)  # noqa: E731
    if fast_linear._POINTWISE:
        monkeypatch.setattr(fast_linear.torch.ops.mkldnn, "_linear_pointwise", spy)
    else:
        monkeypatch.setattr(fast_linear.torch._C._nn, "mkldnn_linear", spy)
    x = torch.randn(2, 4, requires_grad=True)
    fast(x).sum().backward()
    assert x.grad is not None and not packed
    with torch.no_grad():
        assert torch.allclose(fast(x), lin(x), atol=1e-6)
    assert packed == [1]


def test_deepcopy_repacks_and_keeps_ties():
    import copy

    lin = nn.Linear(8, 5)
    model = nn.Sequential(OneDNNLinear(lin))
    clone = copy.deepcopy(model)
    x = torch.randn(2, 8)
    with torch.inference_mode():
        assert torch.allclose(clone(x), model(x))
    assert clone[0].weight is not model[0].weight


def test_stock_linears_swaps_in_plain_layers_sharing_the_weights_and_puts_them_back():
    from leap.core.modeling.fast_linear import stock_linears

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Sequential(nn.ReLU(), nn.Linear(8, 4)))
    accelerate_linears(model)
    fast = [m for m in model.modules() if isinstance(m, OneDNNLinear)]
    x = torch.randn(3, 8)
    with torch.inference_mode():
        want = model(x)
        with stock_linears(model) as n:
            assert n == 2
            plain = [m for m in model.modules() if isinstance(m, nn.Linear)]
            assert len(plain) == 2 and not any(isinstance(m, OneDNNLinear) for m in model.modules())
            assert [p.weight for p in plain] == [f.weight for f in fast]  # the very tensors, not copies
            assert torch.allclose(model(x), want, atol=1e-5)
    assert [m for m in model.modules() if isinstance(m, OneDNNLinear)] == fast


def _slow(forward):
    """``forward`` made ~5 ms slower a call: a planted slow path for the measured choice, slow enough that no round of
    the measurement can go the other way on a loaded 2-core box (2 ms let one round in CI disagree: the verdict was
    not decisive, so not cached, and the cache assertion failed)."""
    import time

    def slow(self, x):
        time.sleep(0.005)
        return forward(self, x)

    return slow


@pytest.mark.parametrize("slow_way", ["packed", "stock"])
def test_the_measured_choice_keeps_the_faster_linears(monkeypatch, tmp_path, slow_way, capsys):
    """choose_linears times the model both ways and keeps the faster: with the packed path made slow it keeps torch's
    own linears (none packed), with torch's own made slow it packs every one; the verdict is written to
    $LEAP_CACHE/linears and read back, not measured again."""
    from leap.core.modeling import fast_linear
    from tests.tiny import tiny_hf_model

    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    monkeypatch.setattr(fast_linear, "_CHOSEN", {})
    if slow_way == "packed":
        monkeypatch.setattr(OneDNNLinear, "forward", _slow(OneDNNLinear.forward))
    else:
        monkeypatch.setattr(nn.Linear, "forward", _slow(nn.Linear.forward))
    model = tiny_hf_model("llama")
    linears = sum(isinstance(m, nn.Linear) for m in model.modules())
    packed = fast_linear.choose_linears(model, name="tiny")
    assert packed == (0 if slow_way == "packed" else linears)
    said = capsys.readouterr().err  # a first measurement is announced, and what it kept
    assert "timing oneDNN-packed against torch's own linears for tiny" in said
    assert ("torch's own kept" if slow_way == "packed" else "packed kept") in said
    assert sum(isinstance(m, OneDNNLinear) for m in model.modules()) == packed
    [record] = list((tmp_path / "linears").glob("*.json"))
    assert record.read_text().count('"packed": ' + ("false" if slow_way == "packed" else "true")) == 1
    monkeypatch.setattr(fast_linear, "_CHOSEN", {})  # a new process: the file decides, nothing is timed
    monkeypatch.setattr(fast_linear, "measure_linears", lambda *a, **k: pytest.fail("measured again"))
    assert fast_linear.choose_linears(tiny_hf_model("llama")) == packed


def test_unpacked_linears_share_the_weights_and_give_the_same_logits():
    from leap.core.modeling.fast_linear import unpack_linears
    from tests.tiny import tiny_hf_model

    model = tiny_hf_model("llama")
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.inference_mode():
        plain = model(input_ids=ids).logits
        weight = model.model.layers[0].mlp.up_proj.weight
        packed = accelerate_linears(model)
        assert torch.allclose(model(input_ids=ids).logits, plain, atol=1e-5)
        assert unpack_linears(model) == packed > 0
        assert not any(isinstance(m, OneDNNLinear) for m in model.modules())
        assert model.model.layers[0].mlp.up_proj.weight is weight
        assert torch.equal(model(input_ids=ids).logits, plain)


def test_wrap_model_forces_either_way_and_measures_by_default(monkeypatch):
    from leap.core.modeling import fast_linear
    from leap.core.modeling.model import wrap_model
    from tests.tiny import tiny_hf_model

    assert wrap_model(tiny_hf_model(), fast_linear=False).info["onednn_linears"] == 0
    assert wrap_model(tiny_hf_model(), fast_linear=True).info["onednn_linears"] > 0
    monkeypatch.setattr(fast_linear, "choose_linears", lambda hf, **k: 123)
    monkeypatch.setattr("leap.core.modeling.model.choose_linears", lambda hf, **k: 123)
    model = wrap_model(tiny_hf_model())
    assert model.info["onednn_linears"] == 123 and model.info["linears"] == "measured"


@pytest.mark.parametrize("last_round_reversed", [False, True])
def test_a_verdict_some_round_contradicts_is_not_decisive(monkeypatch, last_round_reversed):
    """measure_linears' verdict is decisive only when every interleaved round agrees with it: one round where the slower
    path won (a busy moment, or two paths as fast) makes it not decisive, whatever the medians say."""
    from leap.core.modeling import fast_linear

    calls = {"n": 0}

    def fake(hf_model, tokens, packed):  # packed 1 ms, stock 2 ms; the last round's the other way round
        calls["n"] += 1
        last = calls["n"] > 2 * (1 + 4) and calls["n"] <= 2 * (1 + 5) or calls["n"] > 2 * (1 + 5) + 2 * (1 + 4)
        slow = (not packed) != (last and last_round_reversed)
        return 0.002 if slow else 0.001

    monkeypatch.setattr(fast_linear, "_forward_seconds", fake)
    verdict = fast_linear.measure_linears(None, repeats=5, tokens=(1, 9))
    assert verdict["packed"] is True and verdict["decisive"] is (not last_round_reversed)


def test_a_verdict_that_is_not_decisive_is_used_but_not_cached(monkeypatch, tmp_path, capsys):
    from leap.core.modeling import fast_linear
    from tests.tiny import tiny_hf_model

    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    monkeypatch.setattr(fast_linear, "_CHOSEN", {})
    monkeypatch.setattr(fast_linear, "measure_linears", lambda hf, **k: {
        "packed": False, "decisive": False, "seconds": {"packed": {1: 0.002}, "stock": {1: 0.001}}, "tokens": [1]})
    assert fast_linear.choose_linears(tiny_hf_model(), name="tiny") == 0
    assert not (tmp_path / "linears").exists() and "not cached" in capsys.readouterr().err


def test_the_verdict_is_keyed_by_shapes_not_by_where_the_weights_were_read():
    """A GGUF's first load reads the file and later ones its cached float copy: the same architecture, so the same
    verdict; a different shape is another key."""
    from leap.core.modeling.fast_linear import _choice_key
    from tests.tiny import tiny_hf_model

    a, b = tiny_hf_model(), tiny_hf_model()
    b.config._name_or_path = "/somewhere/else"
    assert _choice_key(a) == _choice_key(b)
    assert _choice_key(a) != _choice_key(tiny_hf_model(layers=4))


def test_a_verdict_is_measured_again_with_other_threads(monkeypatch, tmp_path):
    """Issue 54: the thread count is the field of the key that changes between a user's runs (``--threads``); packed
    linears may win at 2 threads and lose at 16 (red when the threads leave the key, in memory or in the file)."""
    from leap.core.modeling import fast_linear
    from tests.tiny import tiny_hf_model

    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    monkeypatch.setattr(fast_linear, "_CHOSEN", {})
    measured = []
    monkeypatch.setattr(fast_linear, "measure_linears", lambda hf, **k: measured.append(torch.get_num_threads()) or {
        "packed": False, "decisive": True, "seconds": {"packed": {1: 0.002}, "stock": {1: 0.001}}, "tokens": [1]})
    threads = torch.get_num_threads()
    try:
        fast_linear.choose_linears(tiny_hf_model(), name="tiny")
        fast_linear.choose_linears(tiny_hf_model(), name="tiny")
        torch.set_num_threads(threads + 1)
        fast_linear.choose_linears(tiny_hf_model(), name="tiny")
    finally:
        torch.set_num_threads(threads)
    assert measured == [threads, threads + 1]
    assert len(list((tmp_path / "linears").glob("*.json"))) == 2
