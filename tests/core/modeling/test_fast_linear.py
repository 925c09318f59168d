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


def test_falls_back_when_grad_is_enabled():
    lin = nn.Linear(4, 3)
    fast = OneDNNLinear(lin)
    x = torch.randn(2, 4, requires_grad=True)
    fast(x).sum().backward()
    assert x.grad is not None


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
