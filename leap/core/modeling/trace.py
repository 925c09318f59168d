"""Per-layer hidden states and keys from one prefill: the input every redundancy metric reads.

LEAP (Stage I) scores layers from the prefill that decoding performs anyway. :func:`capture_trace`
runs that prefill through :class:`~leap.core.modeling.layers.LayerStack` with ``record=`` and keeps, for the
last ``positions`` prompt tokens, the input of every layer plus the final output (pre-norm), and a
copy of each layer's cached keys (for attention-based metrics; the cache's buffers are written in
place, so a view would not be a snapshot).

Who calls what: :class:`leap.core.decoding.decoder.SelfSpecDecoder` ``start(..., trace_positions=N)`` calls
:func:`trace_from_prefill` on its own prefill; ``leap redundancy`` calls :func:`capture_trace`;
metrics in :mod:`leap.redundancy` read :class:`LayerTrace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from leap.core.modeling.layers import LayerStack
from leap.core.modeling.model import LeapModel

__all__ = ["LayerTrace", "capture_trace", "trace_from_prefill"]


@dataclass
class LayerTrace:
    """Hidden states of one prefill at the last N positions.

    Attributes:
        hidden: ``L + 1`` float tensors ``[N, d]``; ``hidden[l]`` is the input of layer ``l`` and
            ``hidden[L]`` the last layer's output (before the final norm).
        keys: ``L`` cached key tensors ``[kv_heads, P, head_dim]`` (all ``P`` prefill positions).
        positions: the absolute positions of the ``N`` rows.
        model: the model the trace came from (metrics use its norm, head and attention modules).
    """

    hidden: list[torch.Tensor]
    keys: list[torch.Tensor]
    positions: list[int]
    model: LeapModel

    @property
    def num_layers(self) -> int:
        return len(self.hidden) - 1

    def layer_output(self, layer: int) -> torch.Tensor:
        return self.hidden[layer + 1]


def trace_from_prefill(
    model: LeapModel, record: dict[int, torch.Tensor], output: torch.Tensor, cache, positions: int
) -> LayerTrace:
    """Build a trace from a prefill's ``record`` (layer -> input ``[1, P, d]``) and its output."""
    length = output.shape[1]
    n = min(positions, length)
    hidden = [record[i][0, -n:].float().clone() for i in range(model.num_layers)]
    hidden.append(output[0, -n:].float().clone())
    keys = [cache.layers[i].keys[0].clone() for i in range(model.num_layers)]
    return LayerTrace(hidden, keys, list(range(length - n, length)), model)


def capture_trace(model: LeapModel, prompt_ids: Sequence[int], positions: int = 8) -> LayerTrace:
    """Prefill ``prompt_ids`` once and return the trace of its last ``positions`` tokens."""
    if positions < 1:
        raise ValueError(f"positions must be at least 1, got {positions}")
    stack = LayerStack(model)
    record: dict[int, torch.Tensor] = {}
    with torch.inference_mode():
        cache = stack.new_cache()
        out = stack.run_layers(stack.embed(list(prompt_ids)), stack.full_plan, cache, 0, record=record)
        return trace_from_prefill(model, record, out, cache, positions)
