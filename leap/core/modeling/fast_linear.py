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
from collections.abc import Iterator, Sequence

import torch
from torch import nn

__all__ = ["OneDNNLinear", "FusedProjection", "SiblingProjection", "PROJECTION_GROUPS", "accelerate_linears",
           "fuse_projections", "onednn_available", "stock_linears"]


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
        if x.dtype != torch.float32 or torch.is_grad_enabled():
            return nn.functional.linear(x, self.weight, self.bias)
        return _packed_product(x, self._packed_weight, self.bias, self._packed_bias)

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


def _packed_product(x: torch.Tensor, packed_weight: torch.Tensor, bias: torch.Tensor | None,
                    packed_bias: torch.Tensor | None) -> torch.Tensor:
    """``x @ W.T + b`` with oneDNN's packed ``W`` (float32 inference)."""
    if _POINTWISE:
        return torch.ops.mkldnn._linear_pointwise(x, packed_weight, bias, "none", [], "")
    y = torch._C._nn.mkldnn_linear(x.reshape(-1, x.shape[-1]).contiguous().to_mkldnn(), packed_weight, packed_bias)
    return y.to_dense().view(*x.shape[:-1], -1)


class _Shared:
    """What one fused product left for the sibling projections of the same input (held until they take it)."""

    def __init__(self, n: int) -> None:
        self.input: torch.Tensor | None = None
        self.parts: list[torch.Tensor | None] = [None] * n

    def take(self, x: torch.Tensor, index: int) -> torch.Tensor | None:
        if self.input is not x or self.parts[index] is None:
            return None
        part, self.parts[index] = self.parts[index], None
        if all(p is None for p in self.parts):
            self.input = None
        return part


def _share(module: nn.Module, linear: OneDNNLinear) -> None:
    """``module`` takes ``linear``'s weights and packed copies (no copy: the tensors are shared)."""
    nn.Module.__init__(module)
    module.in_features, module.out_features = linear.in_features, linear.out_features
    module.weight, module.bias = linear.weight, linear.bias
    module._packed_weight, module._packed_bias = linear._packed_weight, linear._packed_bias


class FusedProjection(OneDNNLinear):
    """The first of several projections of one input (``q_proj`` of q/k/v, ``gate_proj`` of gate/up): one packed
    product over their weights concatenated along the output gives all of them, this module returns its own part
    and leaves the others to its :class:`SiblingProjection` modules, which take them when they are called on the
    very same tensor (the decoder layer's order: q, k, v; gate, up) and compute their own product otherwise - so a
    caller that calls them in another order, or alone, gets the same numbers, only without the saving.

    Why (measured on this project's 2-core CPU, SmolLM2-135M's 30 layers, float32, one token: ``python
    benchmarks/fused_projections.py``): four products a layer instead of seven stream the weights faster. Numerics:
    each output is the same dot product over the same input; oneDNN may block the longer product differently, so
    float32 results can differ from the separate products in the last bits (greedy identity between leap's plain and
    speculative decoding holds as before: both run these modules). A subclass of :class:`OneDNNLinear` with the
    first projection's own weights, so code that copies, swaps or quantises linears (``stock_linears``, heads'
    training copies, low-precision layers) sees one linear with its weights, as before.
    """

    def __init__(self, linears: Sequence[OneDNNLinear], shared: _Shared) -> None:
        _share(self, linears[0])
        self.sizes = [lin.out_features for lin in linears]
        self._shared = shared
        biases = [lin.bias for lin in linears]
        self._fused_weight = torch.cat([lin.weight.detach() for lin in linears]).to_mkldnn()
        self._fused_bias = torch.cat([b.detach() for b in biases]) if all(b is not None for b in biases) else None
        if self._fused_bias is None and any(b is not None for b in biases):
            raise ValueError("fused projections need a bias on all of them or on none")
        self._fused_packed_bias = None if self._fused_bias is None else self._fused_bias.to_mkldnn()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or torch.is_grad_enabled():
            return super().forward(x)  # its own product only: the siblings compute theirs
        parts = _packed_product(x, self._fused_weight, self._fused_bias, self._fused_packed_bias).split(self.sizes, -1)
        self._shared.input, self._shared.parts = x, [None, *parts[1:]]
        return parts[0]


class SiblingProjection(OneDNNLinear):
    """A projection whose product a :class:`FusedProjection` of the same input computed (see there)."""

    def __init__(self, linear: OneDNNLinear, shared: _Shared, index: int) -> None:
        _share(self, linear)
        self._shared, self._index = shared, int(index)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        part = self._shared.take(x, self._index)
        return part if part is not None else super().forward(x)


#: the projections of one input in the decoder layers of the Llama family (Llama, Qwen2, Mistral), as transformers
#: names them: fused by :func:`fuse_projections` where a module holds all of a group as :class:`OneDNNLinear`
PROJECTION_GROUPS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def fuse_projections(module: nn.Module) -> int:
    """Fuse every group of :data:`PROJECTION_GROUPS` below ``module`` whose members are :class:`OneDNNLinear` of the
    same input size (:class:`FusedProjection`); returns how many groups were fused."""
    fused = 0
    for parent in list(module.modules()):
        for group in PROJECTION_GROUPS:
            linears = [getattr(parent, name, None) for name in group]
            if not all(type(lin) is OneDNNLinear for lin in linears) or len({lin.in_features for lin in linears}) != 1:
                continue
            if len({lin.bias is None for lin in linears}) != 1:
                continue
            shared = _Shared(len(group))
            setattr(parent, group[0], FusedProjection(linears, shared))
            for index, (name, lin) in enumerate(zip(group[1:], linears[1:]), start=1):
                setattr(parent, name, SiblingProjection(lin, shared, index))
            fused += 1
    return fused


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
