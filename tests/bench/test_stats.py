"""Bootstrap intervals and verdicts of leap report (leap.bench.stats), against a direct bootstrap."""

import random

import pytest

from leap.bench.report import summarise
from leap.bench.stats import bootstrap_speedup, verdict


def _records(category, per_prompt, method="leap"):
    """per_prompt: (method tokens, method seconds, plain tokens, plain seconds) per prompt."""
    out = []
    for i, (tm, sm, tp, sp) in enumerate(per_prompt):
        qid = f"{category}-{i}"
        base = {"kind": "answer", "question_id": qid, "category": category, "turn": 0, "temperature": 0.0,
                "run": 0, "status": "ok"}
        out.append({**base, "method": "ar", "new_tokens": tp, "wall_time_s": sp, "steps": tp})
        out.append({**base, "method": method, "new_tokens": tm, "wall_time_s": sm, "steps": max(1, tm // 2)})
    return out


def _direct_bootstrap(per_prompt, resamples=20000, seed=1):
    """The textbook percentile bootstrap of the pooled ratio, written independently with loops."""
    rng = random.Random(seed)
    n = len(per_prompt)
    stats = []
    for _ in range(resamples):
        pick = [per_prompt[rng.randrange(n)] for _ in range(n)]
        tm = sum(p[0] for p in pick)
        sm = sum(p[1] for p in pick)
        tp = sum(p[2] for p in pick)
        sp = sum(p[3] for p in pick)
        stats.append((tm / sm) / (tp / sp))
    stats.sort()
    return stats[int(0.025 * resamples)], stats[int(0.975 * resamples) - 1]


SYNTHETIC = [(128, 2.0 + 0.3 * i, 128, 3.0 + 0.1 * (i % 4)) for i in range(10)]  # ratios from 1.5 down to 0.7


def test_report_interval_matches_a_direct_bootstrap():
    row = next(r for r in summarise(_records("mixed", SYNTHETIC)) if r.method == "leap" and r.category == "mixed")
    low, high = _direct_bootstrap(SYNTHETIC)
    assert row.speedup_ci_low == pytest.approx(low, abs=0.02)
    assert row.speedup_ci_high == pytest.approx(high, abs=0.02)
    assert row.speedup_ci_low < row.speedup < row.speedup_ci_high


def test_verdicts_come_from_the_interval():
    faster = [(128, 2.0 + 0.05 * i, 128, 3.0) for i in range(6)]  # every prompt ~1.4-1.5x
    slower = [(128, 4.0 + 0.05 * i, 128, 3.0) for i in range(6)]  # every prompt ~0.7x
    rows = summarise(_records("a", faster) + _records("b", SYNTHETIC) + _records("c", slower))
    got = {r.category: r for r in rows if r.method == "leap"}
    assert got["a"].verdict == "faster" and got["a"].speedup_ci_low > 1
    assert got["b"].speedup_ci_low < 1 < got["b"].speedup_ci_high
    assert got["b"].verdict == "within noise"
    assert got["c"].verdict == "slower" and got["c"].speedup_ci_high < 1


def test_one_prompt_has_no_interval_and_no_verdict():
    interval = bootstrap_speedup([(100, 1.0, 100, 2.0)])
    assert interval.pooled == pytest.approx(2.0) and interval.pooled_low != interval.pooled_low
    assert verdict(interval) == "too few prompts"


def test_both_aggregations_differ_when_lengths_differ():
    # a long generation at 2x and a short one at 0.5x: pooled weighs the long one, the mean does not
    interval = bootstrap_speedup([(1000, 5.0, 1000, 10.0), (10, 2.0, 10, 1.0)])
    assert interval.pooled == pytest.approx((1010 / 7.0) / (1010 / 11.0))
    assert interval.mean_ratio == pytest.approx((2.0 + 0.5) / 2)


def test_compare_alternates_and_times_whole_calls():
    from types import SimpleNamespace

    from leap.bench.compare import compare

    order = []

    def runner(name, tokens):
        def run():
            order.append(name)
            return SimpleNamespace(token_ids=tokens)
        return run

    result = compare(runner("method", [1, 2, 3]), runner("plain", [1, 2, 3]), repeats=4)
    assert order == ["plain", "method", "plain", "method", "method", "plain", "plain", "method", "method", "plain"]
    assert result.order == ["warmup:plain", "warmup:method", "plain", "method", "method", "plain", "plain", "method",
                            "method", "plain"]
    assert len(result.ratios) == 4 and result.low <= result.median <= result.high and result.identical
    different = compare(runner("method", [1, 2, 4]), runner("plain", [1, 2, 3]), repeats=1, warmup=False)
    assert different.identical is False and different.order == ["plain", "method"]
