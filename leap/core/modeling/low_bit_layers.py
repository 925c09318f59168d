"""Low-precision copies of single decoder layers: the per-layer precision action (``LayerAction.LOW``).

A low-bit self-draft (QSpec, Zhao et al. 2024; ML-SpecQD, Georganas et al. 2025) runs the *whole* model
with cheaper weights. LEAP's action set can say it per layer instead: a layer in the draft is executed,
skipped, repeated - or executed with its weights quantised (``Q`` in a :class:`~leap.core.config.LayerConfig`).
This module makes those copies.

:class:`WeightOnlyLinear` stores a linear layer's weight as signed integers with float scales
(symmetric, round-to-nearest; the activations stay in the model's dtype):

* ``bits=8``: one scale per output channel; the product is ``torch._weight_int8pack_mm`` - PyTorch's own
  weight-only int8 kernel (CPU and CUDA; the kernel torchao's int8 weight-only path lowers to), so no
  extra dependency;
* ``bits=4``: one scale per group of ``group_size`` input columns (values in ``[-8, 7]``), dequantised
  at call time - a reference implementation, correct everywhere and slow; a fused int4 GPU kernel
  (tinygemm through torchao) is the place to plug in a fast one.

:func:`low_bit_layer` deep-copies a decoder layer with every linear replaced by its quantised form (the
full-precision weights are shared with the original, never copied) and caches the copy on the
:class:`~leap.core.modeling.model.LeapModel`, so a layer is quantised once per model and precision.

Who calls what: :class:`leap.core.decoding.session.DecodingSession` asks :func:`replacements` for the
step's configuration and hands them to :meth:`leap.core.modeling.layers.LayerStack.run_layers`
(``replace=``) for draft passes only; verification always runs the original layers.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from leap.core.errors import SettingsError
from leap.core.modeling.fast_linear import OneDNNLinear

__all__ = ["WeightOnlyLinear", "low_bit_layer", "replacements", "BITS"]

BITS = (8, 4)
_LINEARS = (nn.Linear, OneDNNLinear)


def _int8_kernel(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor | None:
    """PyTorch's weight-only int8 matmul, or None where this build/device/dtype has no kernel for it."""
    try:
        return torch._weight_int8pack_mm(x, weight, scale)
    except (RuntimeError, AttributeError, NotImplementedError):
        return None


class WeightOnlyLinear(nn.Module):
    """A linear layer with integer weights and float scales (weight-only quantisation)."""

    def __init__(self, linear: nn.Module, bits: int = 8, group_size: int = 32) -> None:
        super().__init__()
        if bits not in BITS:
            raise SettingsError(f"low-precision layers support bits in {BITS}, got {bits}")
        weight = linear.weight.detach().float()
        out_features, in_features = weight.shape
        self.in_features, self.out_features, self.bits = in_features, out_features, int(bits)
        self.bias = None if linear.bias is None else linear.bias.detach()
        self.dtype = linear.weight.dtype
        if bits == 8:
            scale = weight.abs().amax(dim=1).clamp_min(1e-12) / 127.0
            self.register_buffer("qweight", torch.round(weight / scale[:, None]).clamp(-128, 127).to(torch.int8))
            self.register_buffer("scale", scale.to(self.dtype))
            self.group_size = in_features
        else:
            if in_features % group_size:
                raise SettingsError(f"int4 groups of {group_size} columns do not divide {in_features} input features; "
                                    "choose a group_size that does")
            groups = weight.view(out_features, in_features // group_size, group_size)
            scale = groups.abs().amax(dim=2).clamp_min(1e-12) / 7.0
            q = torch.round(groups / scale[..., None]).clamp(-8, 7).to(torch.int8)
            self.register_buffer("qweight", q.view(out_features, in_features))
            self.register_buffer("scale", scale.to(self.dtype))
            self.group_size = int(group_size)
        self._kernel = bits == 8  # try PyTorch's int8 kernel first; off for good once it is unavailable

    def dequantized(self) -> torch.Tensor:
        """The weight the layer computes with, in the model's dtype (for tests and the int4 path)."""
        if self.bits == 8:
            return self.qweight.to(self.dtype) * self.scale[:, None]
        groups = self.qweight.view(self.out_features, -1, self.group_size).to(self.dtype)
        return (groups * self.scale[..., None]).view(self.out_features, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._kernel:
            lead = x.shape[:-1]
            y = _int8_kernel(x.reshape(-1, self.in_features).contiguous(), self.qweight, self.scale)
            if y is not None:
                y = y.view(*lead, self.out_features)
                return y if self.bias is None else y + self.bias
            self._kernel = False
        return nn.functional.linear(x, self.dequantized(), self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}"


def quantize_layer(layer: nn.Module, bits: int = 8, group_size: int = 32) -> nn.Module:
    """A copy of ``layer`` whose linears are :class:`WeightOnlyLinear` (norms and the rest copied)."""
    memo: dict[int, object] = {}
    for module in layer.modules():
        if isinstance(module, _LINEARS):
            memo[id(module)] = WeightOnlyLinear(module, bits, group_size)
    with torch.no_grad():
        return copy.deepcopy(layer, memo).eval()


def low_bit_layer(model, index: int, bits: int = 8) -> nn.Module:
    """Layer ``index`` of ``model`` (a :class:`~leap.core.modeling.model.LeapModel`) at ``bits``, quantised
    on first use and kept in ``model.low_bit_layers``."""
    key = (int(index), int(bits))
    layer = model.low_bit_layers.get(key)
    if layer is None:
        layer = model.low_bit_layers[key] = quantize_layer(model.layers[index], bits)
    return layer


def replacements(model, config, bits: int = 8) -> dict[int, nn.Module]:
    """The draft's layer replacements under ``config`` (a LayerConfig): ``{layer: low-precision copy}``."""
    return {i: low_bit_layer(model, i, bits) for i in config.low}
