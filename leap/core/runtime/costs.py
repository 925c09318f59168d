"""The machine's costs as data: :class:`Calibration` and the cost model it defines.

What the numbers mean is in :mod:`leap.core.decoding.calibrate`, which measures them (``leap calibrate``)
and caches them per model and machine. This module holds only the record and its arithmetic, so that
drafters, draft policies and rewards can read costs without importing the measurement (which times
drafters, and so sits above them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["Calibration", "DENSE_K", "MAX_K"]

#: c(k) is measured at every k up to ``DENSE_K``, then on a sparse grid (24, 32, 48, 64, ...) up to ``MAX_K``
#: for as long as the curve keeps paying (:func:`leap.core.decoding.calibrate.calibrate`): how far trees may
#: grow is the calibration's :attr:`Calibration.max_tree_nodes`, not a constant.
DENSE_K = 16
MAX_K = 64


@dataclass
class Calibration:
    """One machine's costs for one model (see the module docstring); every ratio is in plain steps."""

    key: dict[str, Any]
    step_s: float
    verify_curve: dict[int, float]
    layer_cost: float
    head_cost: float
    drafter_overhead: dict[str, float] = field(default_factory=dict)
    context: int = 0
    draft_curve: dict[int, float] = field(default_factory=dict)  # executed layers -> one-token draft forward
    #: c(k) measured again at a longer context (``long_context`` tokens), in plain steps *at that context*;
    #: empty when only one context was measured. :meth:`verify` interpolates between the two by context.
    long_curve: dict[int, float] = field(default_factory=dict)
    long_context: int = 0
    #: rows -> {tokens per row: a forward over that many rows of that many tokens each}, in plain steps of *one*
    #: row (issue 37: where batched verification turns compute-bound); measured for the batch sizes asked
    #: (:func:`leap.core.decoding.calibrate.batch_calibration_for`), empty until then. Row count 1 is
    #: ``verify_curve``. :meth:`verify_rows` interpolates between the measured sizes.
    batch_curves: dict[int, dict[int, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.verify_curve = {int(k): float(v) for k, v in self.verify_curve.items()}
        self.long_curve = {int(k): float(v) for k, v in self.long_curve.items()}
        self.draft_curve = {int(k): float(v) for k, v in self.draft_curve.items()}
        self.batch_curves = {int(b): {int(k): float(v) for k, v in curve.items()}
                             for b, curve in self.batch_curves.items()}
        if not self.verify_curve or self.step_s <= 0:
            raise ValueError("a calibration needs step_s > 0 and a verification curve")

    # ------------------------------------------------------------------ the cost model
    def verify(self, tokens: int, context: int | None = None) -> float:
        """c(tokens): a full forward over ``tokens`` tokens, in plain steps (interpolated between measured
        k, linear beyond the curve). With ``context`` (tokens already in the cache) and a ``long_curve``,
        interpolated linearly in context between the two measured contexts (clamped outside them)."""
        short = _on_curve(self.verify_curve, tokens)
        if context is None or not self.long_curve or self.long_context <= self.context:
            return short
        w = min(max((int(context) - self.context) / (self.long_context - self.context), 0.0), 1.0)
        return short + w * (_on_curve(self.long_curve, tokens) - short) if w > 0 else short

    def verify_rows(self, rows: int, tokens: int) -> float:
        """A forward over ``rows`` rows of ``tokens`` tokens each, in plain steps of one row: measured batch sizes
        (``batch_curves``, one row from ``verify_curve``) interpolated along the tokens on each, then linearly in
        the rows between the two measured sizes around ``rows`` (extended linearly beyond the largest).
        ``verify_rows(B, 1 + k) / verify_rows(B, 1)`` is what verifying chains of ``k`` costs against a plain step
        of the same batch. Raises ``KeyError`` for ``rows > 1`` when no batch size was measured."""
        rows = max(int(rows), 1)
        curves = {1: self.verify_curve, **self.batch_curves}
        if rows in curves:
            return _on_curve(curves[rows], tokens)
        if len(curves) < 2:
            raise KeyError(f"no batch size measured: `leap calibrate --batch-sizes {rows}` measures it")
        sizes = sorted(curves)
        lo = max([b for b in sizes if b < rows] or sizes[:1])
        hi = min([b for b in sizes if b > rows] or sizes[-1:])
        if hi == lo:  # beyond the largest measured size: the last two, extended
            lo, hi = sizes[-2], sizes[-1]
        a, b = _on_curve(curves[lo], tokens), _on_curve(curves[hi], tokens)
        return a + (b - a) * (rows - lo) / (hi - lo)

    @property
    def max_tree_nodes(self) -> int:
        """The most draft nodes one verification is planned for: the measured curve's end minus the
        verifier's own token (calibration extends the curve for as long as extra tokens can still pay)."""
        return max(max(self.verify_curve) - 1, 1)

    def draft(self, layer_passes: int, layer_tokens: int) -> float:
        """Drafting ``layer_tokens`` tokens with ``layer_passes`` decoder-layer passes in all."""
        return layer_passes * self.layer_cost + layer_tokens * self.head_cost

    def draft_token(self, passes_per_token: int) -> float:
        """One layer-drafted token under a configuration with ``passes_per_token`` layer passes."""
        return self.draft(passes_per_token, 1)

    def step_cost(self, drafted: int, layer_passes: int = 0, layer_tokens: int = 0,
                  drafter: str | None = None, context: int | None = None) -> float:
        """A draft/verify step that drafted ``drafted`` tokens (``layer_tokens`` of them with layers,
        ``layer_passes`` layer passes in all, the rest by ``drafter``) at ``context``, in plain steps."""
        overhead = self.drafter_overhead.get(drafter, 0.0) if drafter else 0.0
        return self.verify(drafted + 1, context) + self.draft(layer_passes, layer_tokens) + overhead

    # ------------------------------------------------------------------ records
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        return cls(**{k: data[k] for k in ("key", "step_s", "verify_curve", "layer_cost", "head_cost")},
                   drafter_overhead=dict(data.get("drafter_overhead", {})), context=int(data.get("context", 0)),
                   draft_curve=dict(data.get("draft_curve", {})), long_curve=dict(data.get("long_curve", {})),
                   long_context=int(data.get("long_context", 0)), batch_curves=dict(data.get("batch_curves", {})))


def _on_curve(curve: dict[int, float], tokens: int) -> float:
    """The curve at ``tokens``: measured, interpolated between measured points, or extended linearly."""
    tokens = max(int(tokens), 1)
    if tokens in curve:
        return curve[tokens]
    ks = sorted(curve)
    if tokens > ks[-1]:
        k0, k1 = ks[-2] if len(ks) > 1 else ks[-1], ks[-1]
        slope = (curve[k1] - curve[k0]) / max(k1 - k0, 1)
        return curve[k1] + slope * (tokens - k1)
    return float(np.interp(tokens, ks, [curve[k] for k in ks]))
