"""Confidence intervals for speedups: a bootstrap over prompts.

A speedup measured on a handful of prompts moves by +-0.2 between runs on a noisy machine, so a
per-category verdict needs an interval. The unit of resampling is the *prompt* (a question with all
its turns and runs): generations of one prompt share its text and are not independent.

Two aggregations, both reported where both are shown:

* **pooled** (Spec-Bench's): ``(sum of the method's tokens / sum of its times) / (the same for plain
  decoding)`` over the prompts - long generations weigh more; what a user decoding all the prompts
  one after another would see;
* **mean of per-prompt ratios**: each prompt's own speedup, averaged - every prompt weighs the same.

:func:`bootstrap_speedup` resamples the prompts with replacement ``resamples`` times (seeded, so a
report is reproducible) and takes the 2.5th and 97.5th percentiles of each aggregation (percentile
bootstrap, Efron and Tibshirani 1993, ch. 13). :func:`verdict` reads only the pooled interval:
``faster`` when it lies above 1, ``slower`` below 1, else ``within noise``; with fewer than
``MIN_PROMPTS`` prompts there is no interval and no verdict.

Who calls what: :func:`leap.bench.report.summarise` calls :func:`bootstrap_speedup` per method,
category and temperature.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SpeedupInterval", "bootstrap_speedup", "verdict", "MIN_PROMPTS"]

MIN_PROMPTS = 2
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


def bootstrap_speedup(per_prompt: Sequence[tuple[float, float, float, float]], *, resamples: int = 2000,
                      seed: int = 0, level: float = 0.95) -> SpeedupInterval:
    """``per_prompt``: one ``(method tokens, method seconds, plain tokens, plain seconds)`` per prompt
    (each summed over the prompt's generations). Returns both aggregations with percentile intervals."""
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
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    sums = data[idx].sum(axis=1)  # [resamples, 4]
    boot_pooled = (sums[:, 0] / sums[:, 1]) / (sums[:, 2] / sums[:, 3])
    boot_mean = ratios[idx].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    lo, hi = np.percentile(boot_pooled, [tail, 100 - tail])
    mlo, mhi = np.percentile(boot_mean, [tail, 100 - tail])
    return SpeedupInterval(float(pooled), float(lo), float(hi), mean_ratio, float(mlo), float(mhi), n)


def verdict(interval: SpeedupInterval) -> str:
    """``faster`` / ``slower`` / ``within noise`` from the pooled interval; ``too few prompts`` without one."""
    if interval.pooled_low != interval.pooled_low:  # NaN: fewer than MIN_PROMPTS prompts
        return "too few prompts"
    if interval.pooled_low > 1.0:
        return "faster"
    if interval.pooled_high < 1.0:
        return "slower"
    return "within noise"
