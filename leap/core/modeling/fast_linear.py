"""A flat-in-k float32 linear layer for CPUs: oneDNN with pre-packed weights, used where it is measured to pay.

Why (measured on this project's first 2-core CPU, an AMD EPYC, SmolLM2-135M, float32, see
``benchmarks/core_bench.py --section forward``): ``torch.nn.Linear`` goes through MKL's sgemm, whose
small-M path reads the weights inefficiently, so a forward over 2 tokens costs 1.6-1.8x one token and
3 tokens 2.1x. Speculative decoding only pays when verifying k tokens costs about as much as one.
oneDNN's inner-product primitive on a weight converted once to its blocked layout
(``Tensor.to_mkldnn()``) streams the weights once for all rows: 1 token gets ~20% faster and 2-4
tokens cost 1.3-1.4x one token instead of 1.5-2.1x.

**Which is faster depends on the machine, so it is measured** (:func:`choose_linears`). On the Intel Xeon this
project moved to, the packed path made plain decoding of the same model slower (``python experiments/2026-11-26-linears/linears.py``,
``docs/data/linears_xeon.json``: 64.6 ms a token against 43.5 ms for MKL's sgemm, and slower at every verification
width measured).
``load_model``/``wrap_model`` therefore time the model's forward over one token and over nine (a plain step and a
typical verification) with both, interleaved, and keep the packed linears only where their sum is the smaller; the
choice is cached per architecture, processor, threads and torch version under ``$LEAP_CACHE/linears`` (and per
process), so it is measured once per machine. ``fast_linear=True``/``False`` (``--linears packed|stock``) force either.

Numerics: still float32 throughout; results differ from MKL's only in summation order (max |diff| of
logits ~1e-4 on SmolLM2). Greedy output of plain and speculative decoding both run through the same
modules, so leap's losslessness tests exercise exactly this path.

Who calls what: :func:`leap.core.modeling.model.wrap_model` (and so ``load_model``) calls :func:`choose_linears`
when the model is float32 on the CPU (``fast_linear=None``, the default there) or :func:`accelerate_linears` when
told to pack (``fast_linear=True``); ``model.info["onednn_linears"]`` says how many were packed (heads loaded for a
packed model are packed too; the calibration is keyed by it).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["OneDNNLinear", "accelerate_linears", "choose_linears", "onednn_available", "stock_linears", "unpack_linears"]


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


def _plain(packed: OneDNNLinear) -> nn.Linear:
    """An ``nn.Linear`` on ``packed``'s very weight and bias tensors (nothing copied)."""
    plain = nn.Linear(packed.in_features, packed.out_features, bias=packed.bias is not None, device="meta")
    plain.weight, plain.bias = packed.weight, packed.bias
    return plain


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
                setattr(parent, name, _plain(child))
                swapped.append((parent, name, child))
    try:
        yield len(swapped)
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)


def unpack_linears(module: nn.Module) -> int:
    """Put plain ``nn.Linear`` layers back in place of every :class:`OneDNNLinear` below ``module``, for good (the
    packed copies are freed; the weights are shared, not copied). Returns how many were replaced."""
    swapped = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, OneDNNLinear):
                setattr(parent, name, _plain(child))
                swapped += 1
    return swapped


#: per process: what :func:`choose_linears` measured for a key (so tests that build many tiny models measure once)
_CHOSEN: dict[str, dict[str, Any]] = {}


def _choice_key(hf_model: nn.Module) -> dict[str, Any]:
    """What the choice depends on: the architecture (its config), the processor, threads and torch."""
    from leap.core.runtime.provenance import processor_name

    from leap.core.modeling.hf_interface import architecture_digest

    arch = architecture_digest(getattr(hf_model, "config", None)) or type(hf_model).__name__
    return {"architecture": arch, "processor": processor_name("cpu"),
            "threads": torch.get_num_threads(), "torch": torch.__version__}


def _choice_file(digest: str) -> Path:
    return Path(os.environ.get("LEAP_CACHE", Path.home() / ".cache" / "leap")) / "linears" / f"{digest}.json"


def _forward_seconds(hf_model: nn.Module, tokens: int, packed: bool) -> float:
    """One forward of ``hf_model`` over ``tokens`` tokens, with its packed linears or torch's own."""
    vocab = int(getattr(getattr(hf_model, "config", None), "vocab_size", 2) or 2)
    ids = (torch.arange(tokens) % max(vocab - 1, 1) + 1).unsqueeze(0)
    with torch.inference_mode(), (contextlib.nullcontext() if packed else stock_linears(hf_model)):
        t0 = time.perf_counter()
        hf_model(input_ids=ids, use_cache=False)
        return time.perf_counter() - t0


def measure_linears(hf_model: nn.Module, *, repeats: int = 5, tokens: tuple[int, ...] = (1, 9)) -> dict[str, Any]:
    """Time ``hf_model``'s forward over each of ``tokens`` tokens with packed (:class:`OneDNNLinear`) and with plain
    linears, alternately (one packed and one plain forward in turn, after one of each untimed, so that a shared
    machine's drift falls on both), and return the medians (seconds) and the verdict: ``packed`` when the packed
    linears' medians sum to less; ``decisive`` when every one of the ``repeats`` rounds (its forwards over every
    ``tokens`` summed, one way against the other) agrees with it - a verdict a busy machine could have reversed is
    not. The model must have its linears packed (:func:`accelerate_linears`)."""
    medians: dict[str, dict[int, float]] = {"packed": {}, "stock": {}}
    rounds = {"packed": [0.0] * repeats, "stock": [0.0] * repeats}
    for q in tokens:
        _forward_seconds(hf_model, q, True), _forward_seconds(hf_model, q, False)  # warm both
        runs: dict[str, list[float]] = {"packed": [], "stock": []}
        for i in range(repeats):
            for way in runs:
                runs[way].append(_forward_seconds(hf_model, q, way == "packed"))
                rounds[way][i] += runs[way][-1]
        for way, times in runs.items():
            medians[way][q] = statistics.median(times)
    totals = {way: sum(m.values()) for way, m in medians.items()}
    packed = totals["packed"] < totals["stock"]
    decisive = all((p < s) == packed for p, s in zip(rounds["packed"], rounds["stock"]))
    return {"packed": packed, "decisive": decisive, "seconds": medians, "tokens": list(tokens)}


def choose_linears(hf_model: nn.Module, *, cache: bool = True, name: str = "") -> int:
    """Pack ``hf_model``'s float32 CPU linears (:func:`accelerate_linears`) where that is measured to make its forward
    faster on this machine (:func:`measure_linears`), else leave torch's own. The verdict is remembered per
    architecture, processor, threads and torch (in this process, and in ``$LEAP_CACHE/linears`` unless ``cache`` is
    False; ``name`` labels the file for ``leap doctor``). Returns how many linears are packed (0: torch's own kept)."""
    if not onednn_available():
        return 0
    key = _choice_key(hf_model)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    verdict = _CHOSEN.get(digest)
    path = _choice_file(digest)
    if verdict is None and cache and path.is_file():
        try:
            verdict = json.loads(path.read_text())
        except (OSError, ValueError):
            verdict = None
    if verdict is not None and "packed" in verdict:
        _CHOSEN[digest] = verdict
        return accelerate_linears(hf_model) if verdict["packed"] else 0
    packed = accelerate_linears(hf_model)
    if not packed:
        return 0
    if cache:  # a real load (load_model): say what the first one spends, as calibration does
        print(f"leap: timing oneDNN-packed against torch's own linears for {name or 'this model'} on this CPU "
              f"(once per machine; cached in {path.parent}; --linears packed|stock skips it)", file=sys.stderr, flush=True)
    verdict = {**measure_linears(hf_model), "key": key, "model": name}
    _CHOSEN[digest] = verdict
    if cache:
        ms = {way: 1000 * sum(v.values()) for way, v in verdict["seconds"].items()}
        kept = "packed" if verdict["packed"] else "torch's own"
        print(f"leap: linears: {kept} kept (one and nine tokens: {ms['packed']:.1f} ms packed, {ms['stock']:.1f} ms "
              f"stock)" + ("" if verdict.get("decisive", True) else "; not every round agreed (a busy machine, or "
                           "two paths as fast): not cached, measured again on the next load"), file=sys.stderr, flush=True)
    if cache and verdict.get("decisive", True):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(verdict, indent=1, default=str))
        except OSError:
            pass
    if verdict["packed"]:
        return packed
    unpack_linears(hf_model)
    return 0
