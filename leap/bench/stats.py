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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SpeedupInterval", "speedup_interval", "verdict", "MIN_PROMPTS"]

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
