"""``leap generate --compare``: a method against plain decoding, interleaved, with a spread.

One warm-up call of each (untimed), then ``repeats`` rounds; each round runs both, the order
alternating (plain first in even rounds, the method first in odd ones), so drift of a shared
machine hits both alike. Each call is timed by one wall clock around the *whole* call
(:func:`leap.core.runtime.device.wall_clock`: search, probes, prefill and decoding; the device synchronised
at both ends). A round's ratio is the method's tokens/s over plain decoding's; the result is the
median ratio with the lowest and highest round.

Who calls what: :func:`leap.cli._cmd_generate` with ``--compare``; tests pass recording callables to
see the order of runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leap.core.runtime.device import wall_clock

__all__ = ["Comparison", "compare"]


@dataclass
class Comparison:
    ratios: list[float]
    method_seconds: list[float]
    plain_seconds: list[float]
    order: list[str] = field(default_factory=list)  # "warmup:plain", "plain", "method", ...
    identical: bool = True  # every timed method output equals every timed plain output
    last_method: Any = None
    last_plain: Any = None

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def low(self) -> float:
        return min(self.ratios)

    @property
    def high(self) -> float:
        return max(self.ratios)


def compare(run_method: Callable[[], Any], run_plain: Callable[[], Any], *, repeats: int = 3, warmup: bool = True,
            tokens: Callable[[Any], list[int]] = lambda out: list(out.token_ids), device=None) -> Comparison:
    """Run both ``repeats`` times, alternating which goes first (see the module docstring).

    ``run_method``/``run_plain`` decode the prompt and return an outcome; ``tokens`` reads its new token ids.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    result = Comparison([], [], [])
    if warmup:
        for name, fn in (("plain", run_plain), ("method", run_method)):
            fn()
            result.order.append(f"warmup:{name}")
    plain_ids: list[list[int]] = []
    method_ids: list[list[int]] = []
    for round_ in range(repeats):
        pair = (("plain", run_plain), ("method", run_method))
        timed: dict[str, tuple[float, Any]] = {}
        for name, fn in pair if round_ % 2 == 0 else pair[::-1]:
            start = wall_clock(device)
            out = fn()
            timed[name] = (wall_clock(device) - start, out)
            result.order.append(name)
        (t_m, out_m), (t_p, out_p) = timed["method"], timed["plain"]
        ids_m, ids_p = tokens(out_m), tokens(out_p)
        method_ids.append(ids_m)
        plain_ids.append(ids_p)
        result.method_seconds.append(t_m)
        result.plain_seconds.append(t_p)
        rate_m = len(ids_m) / t_m if t_m > 0 else 0.0
        rate_p = len(ids_p) / t_p if t_p > 0 else 0.0
        result.ratios.append(rate_m / rate_p if rate_p > 0 else float("nan"))
        result.last_method, result.last_plain = out_m, out_p
    result.identical = all(ids == plain_ids[0] for ids in method_ids + plain_ids)
    return result
