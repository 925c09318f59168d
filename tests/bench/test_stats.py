"""Speedup intervals and verdicts of leap report (leap.bench.stats): their coverage is what they claim."""

import random

import numpy as np
import pytest

from leap.bench.report import summarise
from leap.bench.stats import MIN_PROMPTS, speedup_interval, verdict



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


def _percentile_bootstrap(per_prompt, resamples=2000, seed=1):
    """The textbook percentile bootstrap of the pooled ratio (the method leap used before), with loops."""
    rng = random.Random(seed)
    n = len(per_prompt)
    stats = []
    for _ in range(resamples):
        pick = [per_prompt[rng.randrange(n)] for _ in range(n)]
        stats.append((sum(p[0] for p in pick) / sum(p[1] for p in pick)) / (sum(p[2] for p in pick) /
                                                                            sum(p[3] for p in pick)))
    stats.sort()
    return stats[int(0.025 * resamples)], stats[int(0.975 * resamples) - 1]


SYNTHETIC = [(128, 2.0 + 0.3 * i, 128, 3.0 + 0.1 * (i % 4)) for i in range(10)]  # ratios from 1.5 down to 0.7


def _population(rng, n, spread):
    """n prompts: plain seconds uniform in [3, 8], log-normal speedups around 1.5, token counts 64-192."""
    plain = rng.uniform(3, 8, n)
    tokens = rng.integers(64, 193, n).astype(float)
    return list(zip(tokens, plain / (1.5 * np.exp(rng.normal(0, spread, n))), tokens, plain))


def _truth(rng, spread):
    big = np.array(_population(rng, 1_000_000, spread))
    return (big[:, 0].sum() / big[:, 1].sum()) / (big[:, 2].sum() / big[:, 3].sum())


@pytest.mark.parametrize("n, spread", [(MIN_PROMPTS, 0.3), (6, 0.5), (13, 0.1)])
def test_intervals_cover_the_true_pooled_speedup_95_percent_of_the_time(n, spread):
    rng = np.random.default_rng(n)
    truth, runs, hits = _truth(rng, spread), 1500, 0
    for _ in range(runs):
        ci = speedup_interval(_population(rng, n, spread))
        hits += ci.pooled_low <= truth <= ci.pooled_high
    # 95% claimed; 1500 runs give a standard error of 0.6 points
    assert 0.925 <= hits / runs <= 0.975, hits / runs


def test_the_coverage_test_catches_the_percentile_bootstrap_at_few_prompts():
    """Negative control: the method leap used before (percentile bootstrap) covers far less than 95% at
    MIN_PROMPTS prompts (its bounds are nearly the worst and best prompt), so the test above can fail."""
    rng = np.random.default_rng(7)
    truth, runs, hits = _truth(rng, 0.3), 300, 0
    for i in range(runs):
        low, high = _percentile_bootstrap(_population(rng, MIN_PROMPTS, 0.3), resamples=400, seed=i)
        hits += low <= truth <= high
    assert hits / runs < 0.85


def test_report_interval_is_the_t_interval_of_the_pooled_speedup():
    row = next(r for r in summarise(_records("mixed", SYNTHETIC)) if r.method == "leap" and r.category == "mixed")
    ci = speedup_interval(SYNTHETIC)
    assert (row.speedup_ci_low, row.speedup_ci_high) == pytest.approx((ci.pooled_low, ci.pooled_high))
    assert row.speedup_ci_low < row.speedup < row.speedup_ci_high
    # on smooth data the delta-method t interval and a percentile bootstrap are close (n = 10)
    low, high = _percentile_bootstrap(SYNTHETIC)
    assert abs(row.speedup_ci_low - low) < 0.15 and abs(row.speedup_ci_high - high) < 0.15


def test_intervals_resample_prompts_not_generations():
    """Several runs of one prompt are one observation: the report sums each prompt's runs before the
    interval (runs of one prompt are not independent draws). Intervals over generations would be
    narrower here; this turns red if the report treats each run as a prompt."""
    runs = [[(128, 2.0 + 0.3 * i + 0.01 * r, 128, 3.0 + 0.1 * (i % 4)) for i in range(4)] for r in range(3)]
    records = []
    for r, per_prompt in enumerate(runs):
        records += [{**rec, "run": r} for rec in _records("mixed", per_prompt)]
    row = next(x for x in summarise(records) if x.method == "leap" and x.category == "mixed")
    by_prompt = [tuple(sum(run[i][j] for run in runs) for j in range(4)) for i in range(4)]
    by_generation = [g for run in runs for g in run]
    ci, wrong = speedup_interval(by_prompt), speedup_interval(by_generation)
    assert row.prompts == 4 and row.generations == 12
    assert (row.speedup_ci_low, row.speedup_ci_high) == pytest.approx((ci.pooled_low, ci.pooled_high))
    assert wrong.pooled_high - wrong.pooled_low < 0.6 * (ci.pooled_high - ci.pooled_low)


def test_verdicts_come_from_the_interval():
    faster = [(128, 2.0 + 0.05 * i, 128, 3.0) for i in range(6)]  # every prompt ~1.4-1.5x
    slower = [(128, 4.0 + 0.05 * i, 128, 3.0) for i in range(6)]  # every prompt ~0.7x
    rows = summarise(_records("a", faster) + _records("b", SYNTHETIC) + _records("c", slower))
    got = {r.category: r for r in rows if r.method == "leap"}
    assert got["a"].verdict == "faster" and got["a"].speedup_ci_low > 1
    assert got["b"].speedup_ci_low < 1 < got["b"].speedup_ci_high
    assert got["b"].verdict == "within noise"
    assert got["c"].verdict == "slower" and got["c"].speedup_ci_high < 1


def test_fewer_than_min_prompts_have_no_interval_and_no_verdict():
    interval = speedup_interval([(100, 1.0, 100, 2.0)] * (MIN_PROMPTS - 1))
    assert interval.pooled == pytest.approx(2.0) and interval.pooled_low != interval.pooled_low
    assert verdict(interval) == "too few prompts"


def test_both_aggregations_differ_when_lengths_differ():
    # a long generation at 2x and a short one at 0.5x: pooled weighs the long one, the mean does not
    interval = speedup_interval([(1000, 5.0, 1000, 10.0), (10, 2.0, 10, 1.0)])
    assert interval.pooled == pytest.approx((1010 / 7.0) / (1010 / 11.0))
    assert interval.mean_ratio == pytest.approx((2.0 + 0.5) / 2)


def test_compare_alternates_and_times_whole_calls():
    from types import SimpleNamespace

    from leap.bench.stats import compare

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


def _write_run(folder, commits):
    import json

    folder.mkdir()
    lines = [{"kind": "meta", "provenance": {"commit": c}} for c in commits]
    lines += _records("qa", SYNTHETIC[:4])
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return str(folder)


def test_report_refuses_mixed_commits_unless_told_and_flags_dirty_records(tmp_path, capsys):
    from leap.cli import main

    mixed = _write_run(tmp_path / "mixed", ["aaaaaaa", "bbbbbbb"])
    assert main(["report", mixed]) == 2
    assert "2 commits (aaaaaaa, bbbbbbb)" in capsys.readouterr().err
    assert main(["report", mixed, "--mixed"]) == 0
    out = capsys.readouterr().out
    assert "commit aaaaaaa, bbbbbbb" in out and "WARNING" not in out
    assert main(["report", _write_run(tmp_path / "dirty", ["ccccccc+dirty"])]) == 0
    assert "WARNING: measured with uncommitted changes (ccccccc+dirty)" in capsys.readouterr().out


@pytest.mark.parametrize("n, spread", [(6, 0.2), (13, 0.1), (39, 0.3)])
def test_the_mean_of_per_prompt_ratios_interval_covers_its_truth(n, spread):
    """The second aggregation `leap report` prints (mean of per-prompt speedups, t interval): 95% coverage of the
    population mean ratio 1.5 exp(spread^2 / 2) (issue 33: std/n for std/sqrt(n) stayed green)."""
    rng = np.random.default_rng(100 + n)
    truth, runs, hits = 1.5 * np.exp(spread**2 / 2), 1500, 0
    for _ in range(runs):
        ci = speedup_interval(_population(rng, n, spread))
        hits += ci.mean_ratio_low <= truth <= ci.mean_ratio_high
    assert 0.925 <= hits / runs <= 0.975, hits / runs
