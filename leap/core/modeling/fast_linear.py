"""A flat-in-k float32 linear layer for CPUs: oneDNN with pre-packed weights.

Why (measured on this project's 2-core CPU, SmolLM2-135M, float32, see
``benchmarks/core_bench.py --section forward``): ``torch.nn.Linear`` goes through MKL's sgemm, whose
small-M path reads the weights inefficiently, so a forward over 2 tokens costs 1.6-1.8x one token and
3 tokens 2.1x. Speculative decoding only pays when verifying k tokens costs about as much as one.
oneDNN's inner-product primitive on a weight converted once to its blocked layout
(``Tensor.to_mkldnn()``) streams the weights once for all rows: 1 token gets ~20% faster and 2-4
tokens cost 1.3-1.4x one token instead of 1.5-2.1x.

Numerics: still float32 throughout; results differ from MKL's only in summation order (max |diff| of
logits ~1e-4 on SmolLM2). Greedy output of plain and speculative decoding both run through the same
modules, so leap's losslessness tests exercise exactly this path.

Who calls what: :func:`leap.core.modeling.model.load_model` calls :func:`accelerate_linears` when the model is
float32 on the CPU (``fast_linear=True``, the default there); nothing else needs to know.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import torch
from torch import nn

__all__ = ["OneDNNLinear", "accelerate_linears", "onednn_available", "stock_linears"]


def _pointwise_available() -> bool:
    try:
        return hasattr(torch.ops.mkldnn, "_linear_pointwise")
    except (AttributeError, RuntimeError):
        return False


def onednn_available() -> bool:
    """Whether this torch build can run :class:`OneDNNLinear`."""
    return bool(torch.backends.mkldnn.is_available()) and hasattr(torch._C._nn, "mkldnn_linear")


# torch's fused oneDNN linear (what inductor uses): dense input and output, packed weight - no
# per-call conversions to and from oneDNN's tensor format (measured: 1536x576, 1 row: 43 us vs 63 us
# with the conversions; 4 rows: 71 vs 93 us).
_POINTWISE = _pointwise_available()


class OneDNNLinear(nn.Module):
    """Drop-in replacement of an inference-only float32 ``nn.Linear`` on the CPU.

    Keeps the dense ``weight`` (shared, not copied, so tied embeddings stay tied and code that reads
    ``.weight`` still works) and a oneDNN-packed copy used for the product.
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        if linear.weight.dtype != torch.float32 or linear.weight.device.type != "cpu":
            raise ValueError("OneDNNLinear supports float32 weights on the CPU only")
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self._packed_weight = linear.weight.detach().to_mkldnn()
        self._packed_bias = None if linear.bias is None else linear.bias.detach().to_mkldnn()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        if x.dtype != torch.float32 or torch.is_grad_enabled():
            return nn.functional.linear(x, self.weight, self.bias)
        if _POINTWISE:
            return torch.ops.mkldnn._linear_pointwise(x, self._packed_weight, self.bias, "none", [], "")
        x2 = x.reshape(-1, self.in_features)
        y = torch._C._nn.mkldnn_linear(x2.contiguous().to_mkldnn(), self._packed_weight, self._packed_bias)
        return y.to_dense().view(*lead, self.out_features)

    def __deepcopy__(self, memo: dict) -> OneDNNLinear:
        """Copy the dense weights and repack them (oneDNN's opaque tensors cannot be deep-copied)."""
        linear = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None)
        linear.weight = copy.deepcopy(self.weight, memo)
        if self.bias is not None:
            linear.bias = copy.deepcopy(self.bias, memo)
        clone = OneDNNLinear(linear)
        memo[id(self)] = clone
        return clone

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def accelerate_linears(module: nn.Module) -> int:
    """Replace every float32 CPU ``nn.Linear`` below ``module`` by :class:`OneDNNLinear`.

    Returns:
        How many layers were replaced (0 when oneDNN is unavailable).
    """
    if not onednn_available():
        return 0
    replaced = 0
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            if child.weight.dtype == torch.float32 and child.weight.device.type == "cpu":
                setattr(module, name, OneDNNLinear(child))
                replaced += 1
        else:
            replaced += accelerate_linears(child)
    return replaced


@contextlib.contextmanager
def stock_linears(module: nn.Module) -> Iterator[int]:
    """Run ``module`` with plain ``nn.Linear`` layers in place of :class:`OneDNNLinear`, then put them back.

    The stand-ins share the very weight and bias tensors, so nothing is copied: this is the model exactly
    as transformers builds it (MKL's sgemm), the baseline for "leap's plain decoding against transformers'
    ``generate``" (``leap bench --methods hf-ar --method-arg hf-ar:linears=stock``). Yields how many layers
    were swapped.
    """
    swapped: list[tuple[nn.Module, str, OneDNNLinear]] = []
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, OneDNNLinear):
                plain = nn.Linear(child.in_features, child.out_features, bias=child.bias is not None,
                                  device="meta")
                plain.weight = child.weight
                plain.bias = child.bias
                setattr(parent, name, plain)
                swapped.append((parent, name, child))
    try:
        yield len(swapped)
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)
