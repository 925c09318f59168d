"""Confidence intervals for speedups over prompts, with the coverage they claim.

A speedup measured on a handful of prompts moves by +-0.2 between runs on a noisy machine, so a
per-category verdict needs an interval. The unit is the *prompt* (a question with all its turns and
runs, summed): generations of one prompt share its text and are not independent.

Two aggregations, both reported where both are shown:

* **pooled** (Spec-Bench's): ``R = (sum of the method's tokens / sum of its times) / (the same for plain
  decoding)`` over the prompts - long generations weigh more; what a user decoding all the prompts
  one after another would see;
* **mean of per-prompt ratios**: each prompt's own speedup, averaged - every prompt weighs the same.

Method (:func:`speedup_interval`): Student-t intervals with ``n - 1`` degrees of freedom. The pooled
speedup is a smooth function of four means (tokens and seconds of the method and of plain decoding),
so the standard error of its logarithm is the delta method's: the standard deviation of each
prompt's linearised influence over ``sqrt(n)`` (as for a ratio estimator, Cochran 1977, ch. 6); the
interval is taken on the log scale and exponentiated, so its bounds are positive and it is wider above
than below, as a ratio's should be. The mean of ratios gets the ordinary t interval (clipped at 0). Simulated with log-normal per-prompt speedups (spread 0.1-0.5 in log),
their coverage is 93-95% from 3 prompts on (``tests/bench/test_stats.py`` checks it), where the
percentile bootstrap used before covered 77% at 3 prompts and 89% at 10 (its 3-prompt bounds are
the worst and best prompt). Below :data:`MIN_PROMPTS` (3) there is no interval and no verdict.

:func:`verdict` reads only the pooled interval: ``faster`` when it lies above 1, ``slower`` below 1,
else ``within noise``; ``too few prompts`` without an interval.

Who calls what: :func:`leap.bench.report.summarise` calls :func:`speedup_interval` per method,
category and temperature.

``leap generate --compare`` (:func:`compare`): a method against plain decoding, interleaved, with a spread. One
warm-up call of each (untimed), then ``repeats`` rounds; each round runs both, the order alternating (plain
first in even rounds, the method first in odd ones), so drift of a shared machine hits both alike. Each call is timed by one wall clock around the *whole* call
(:func:`leap.core.runtime.device.wall_clock`: search, probes, prefill and decoding; the device synchronised
at both ends). A round's ratio is the method's tokens/s over plain decoding's; the result is the
median ratio with the lowest and highest round.

Who calls what: ``leap generate --compare`` (:mod:`leap.cli.generate`); tests pass recording callables to see the
order of runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leap.core.runtime.device import wall_clock

__all__ = ["Comparison", "SpeedupInterval", "compare", "speedup_interval", "verdict", "MIN_PROMPTS"]

MIN_PROMPTS = 3
NAN = float("nan")


@dataclass(frozen=True)
class SpeedupInterval:
    pooled: float
    pooled_low: float
    pooled_high: float
    mean_ratio: float
    mean_ratio_low: float
    mean_ratio_high: float
    prompts: int


def speedup_interval(per_prompt: Sequence[tuple[float, float, float, float]], *, level: float = 0.95,
                     **_ignored) -> SpeedupInterval:
    """``per_prompt``: one ``(method tokens, method seconds, plain tokens, plain seconds)`` per prompt
    (each summed over the prompt's generations). Both aggregations with t intervals (module docstring)."""
    from scipy import stats

    data = np.asarray(per_prompt, dtype=float).reshape(-1, 4)
    n = len(data)
    if n == 0:
        return SpeedupInterval(NAN, NAN, NAN, NAN, NAN, NAN, 0)
    tok_m, sec_m, tok_p, sec_p = data.T
    ratios = (tok_m / sec_m) / (tok_p / sec_p)
    pooled = (tok_m.sum() / sec_m.sum()) / (tok_p.sum() / sec_p.sum())
    mean_ratio = float(np.mean(ratios))
    if n < MIN_PROMPTS:
        return SpeedupInterval(float(pooled), NAN, NAN, mean_ratio, NAN, NAN, n)
    t = float(stats.t.ppf(0.5 + level / 2, n - 1))
    # delta method: pooled = f(means) = (m_tok_m / m_sec_m) / (m_tok_p / m_sec_p); its influence per prompt
    z = pooled * (tok_m / tok_m.mean() - sec_m / sec_m.mean() - tok_p / tok_p.mean() + sec_p / sec_p.mean())
    se_log = float(np.std(z / pooled, ddof=1) / np.sqrt(n))  # on log(pooled): bounds stay positive
    se_mean = float(np.std(ratios, ddof=1) / np.sqrt(n))
    return SpeedupInterval(float(pooled), float(pooled * np.exp(-t * se_log)), float(pooled * np.exp(t * se_log)),
                           mean_ratio, max(0.0, mean_ratio - t * se_mean), mean_ratio + t * se_mean, n)




def verdict(interval: SpeedupInterval) -> str:
    """``faster`` / ``slower`` / ``within noise`` from the pooled interval; ``too few prompts`` without one."""
    if interval.pooled_low != interval.pooled_low:  # NaN: fewer than MIN_PROMPTS prompts
        return "too few prompts"
    if interval.pooled_low > 1.0:
        return "faster"
    if interval.pooled_high < 1.0:
        return "slower"
    return "within noise"



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
