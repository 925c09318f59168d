"""Device-safe host transfers and timing on CPUs and GPUs.

Two rules keep leap correct and its clocks honest on an accelerator:

* **Transfers to the host are explicit.** A tensor that lives on a GPU cannot become a NumPy array
  or a Python number without a copy to the host; ``tensor.numpy()`` raises on CUDA. Code that needs
  host values calls :func:`to_host` (or ``.cpu()`` right before ``.numpy()``). The static check
  :func:`leap.core.runtime.host_transfers.find_implicit_transfers` enforces the rule on every module of
  ``leap/`` (``tests/core/runtime/test_host_transfers.py``), so it holds even where no GPU runs the tests.
* **One synchronisation per step.** GPU work is asynchronous, so a host clock read between two
  launches measures launch time, not work. :class:`StepClock` records CUDA events at every mark
  (no synchronisation) and reads them after :meth:`StepClock.settle`, one ``synchronize`` per step;
  on a CPU the marks are ``time.perf_counter`` readings. Durations are therefore the device's
  elapsed time between marks, idle gaps included (the wall time of the step).

Who calls what: :class:`leap.core.modeling.layers.LayerStack` owns a :class:`StepClock`;
:class:`leap.core.decoding.decoder.DecodingSession` marks a step's phases and settles once at its end;
the harness (:mod:`leap.bench.harness`), ``leap generate --compare`` and ``leap smoke`` time whole
calls with :func:`wall_clock`, which synchronises before reading the host clock.
"""

from __future__ import annotations

import time
from typing import Union

import numpy as np
import torch

__all__ = ["to_host", "to_numpy", "StepClock", "wall_clock", "synchronize", "timed_call"]

Mark = Union[float, "torch.cuda.Event"]


def to_host(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` detached and copied to the CPU (a no-op view on the CPU)."""
    return tensor.detach().to("cpu")


def to_numpy(tensor: torch.Tensor, dtype=float) -> np.ndarray:
    """A NumPy array of ``tensor``'s values (explicit host copy, float64 by default)."""
    return to_host(tensor).float().numpy().astype(dtype)


def synchronize(device: torch.device | str | None) -> None:
    """Wait for queued work on ``device`` (nothing to wait for on a CPU)."""
    dev = torch.device(device) if device is not None else None
    if dev is not None and dev.type == "cuda":
        torch.cuda.synchronize(dev)


def wall_clock(device: torch.device | str | None = None) -> float:
    """``time.perf_counter()`` after the device's queued work has finished: the clock for timing a
    whole call (start and end) on any device."""
    synchronize(device)
    return time.perf_counter()


def timed_call(fn, device: torch.device | str | None = None):
    """``(fn(), seconds)``: one wall clock around the whole call, the device synchronised at both ends."""
    start = wall_clock(device)
    result = fn()
    return result, wall_clock(device) - start


class StepClock:
    """Marks within one decoding step, read after a single synchronisation (see the module docstring).

    Usage::

        a = clock.mark(); ...work...; b = clock.mark()
        clock.settle()                      # once per step
        seconds = clock.seconds(a, b)
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.events = self.device.type == "cuda"

    def mark(self) -> Mark:
        """A point in the device's timeline (a host reading on the CPU); never synchronises."""
        if self.events:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def settle(self) -> None:
        """Wait for the device once; afterwards every earlier mark can be read."""
        synchronize(self.device)

    def seconds(self, start: Mark, end: Mark) -> float:
        """Elapsed seconds from ``start`` to ``end`` (call :meth:`settle` first on a GPU)."""
        if self.events:
            return float(start.elapsed_time(end)) / 1000.0
        return float(end) - float(start)
