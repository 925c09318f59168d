"""leap.bench.report on hand-made records: M, speedup, lossless and failures computed by hand."""

from __future__ import annotations

import math

import pytest

from leap.bench.report import early_speedup, summarise, table1_markdown, table2_markdown, to_csv


def rec(qid, cat, method, tokens, time, steps, *, t=0.0, turn=0, run=0, lossless=None, status="ok"):
    r = {"kind": "answer", "question_id": qid, "category": cat, "turn": turn, "temperature": t, "run": run,
         "method": method, "status": status}
    if status == "ok":
        r.update(new_tokens=tokens, wall_time_s=time, steps=steps)
        if lossless is not None:
            r["lossless"] = lossless
    return r


RECORDS = [
    {"kind": "meta", "model": "hand"},
    rec(1, "math", "ar", 100, 10.0, 100), rec(1, "math", "leap", 100, 5.0, 40, lossless=True),
    rec(2, "math", "ar", 50, 10.0, 50), rec(2, "math", "leap", 50, 4.0, 25, lossless=False),
    rec(3, "qa", "ar", 60, 6.0, 60), rec(3, "qa", "leap", 60, 12.0, 60, lossless=True),
    rec(3, "qa", "ar", 60, 3.0, 60, t=1.0), rec(3, "qa", "leap", 60, 2.0, 20, t=1.0),
    rec(4, "qa", "leap", 0, 0, 0, status="failed"),  # failed, and no plain record to pair with
]


def by(rows, method, cat, t=0.0):
    return next(r for r in rows if r.method == method and r.category == cat and r.temperature == t)


def test_speedup_and_m_pool_tokens_and_time_per_category():
    rows = summarise(RECORDS)
    math_ = by(rows, "leap", "math")
    # leap: 150 tokens in 9 s; ar: 150 tokens in 20 s -> (150/9)/(150/20) = 20/9
    assert math_.speedup == pytest.approx(20 / 9)
    assert math_.mean_accepted == pytest.approx(150 / 65)  # 150 tokens over 40 + 25 steps
    assert math_.lossless == "1/2" and math_.prompts == 2 and math_.failed == 0
    qa = by(rows, "leap", "qa")
    assert qa.speedup == pytest.approx(0.5) and qa.mean_accepted == pytest.approx(1.0) and qa.failed == 1
    overall = by(rows, "leap", "overall")
    # 210 tokens in 21 s vs 210 tokens in 26 s
    assert overall.speedup == pytest.approx(26 / 21)
    assert overall.mean_accepted == pytest.approx(210 / 125)
    assert overall.lossless == "2/3" and overall.failed == 1
    hot = by(rows, "leap", "overall", 1.0)
    assert hot.speedup == pytest.approx(1.5) and hot.mean_accepted == pytest.approx(3.0) and hot.lossless == ""
    plain = by(rows, "ar", "overall")
    assert plain.speedup == pytest.approx(1.0) and plain.mean_accepted == pytest.approx(1.0)


def test_tables_and_csv_carry_the_numbers():
    rows = summarise(RECORDS)
    md = table1_markdown(rows)
    assert "**T = 0**" in md and "**T = 1**" in md
    assert "| leap | 2.31 / 2.22x ? | 1.00 / 0.50x ? | 1.68 | 1.24x [0.14, 11.24] | 1.67x [0.00, 4.25] | 2/3 | 1 |" in md
    csv_text = to_csv(rows)
    header = csv_text.splitlines()[0].split(",")
    for col in ("method", "category", "temperature", "prompts", "mean_accepted", "speedup", "lossless"):
        assert col in header
    assert "leap,overall,0.0,3,3,1.68,1.2381,2/3,1" in csv_text
    t2 = table2_markdown(rows)
    assert "| LEAP (`leap`) | 1.68 | 1.24x [0.14, 11.24] | 3.00 | 1.50x |" in t2  # T=1: one prompt, no interval
    assert "no ablation" in table2_markdown([r for r in rows if r.method == "ar"])


def test_a_resumed_retry_replaces_a_failure():
    records = [rec(1, "math", "ar", 10, 1.0, 10), rec(1, "math", "leap", 0, 0, 0, status="failed"),
               rec(1, "math", "leap", 10, 0.5, 5, lossless=True)]
    row = by(summarise(records), "leap", "math")
    assert row.failed == 0 and row.speedup == pytest.approx(2.0) and row.lossless == "1/1"


def test_unpaired_records_are_left_out():
    """Without plain decoding of the same prompt there is no speedup to report."""
    assert summarise([rec(1, "math", "leap", 10, 1.0, 5)]) == []
    rows = summarise([rec(1, "math", "leap", 10, 1.0, 5), rec(2, "math", "leap", 0, 0, 0, status="failed")])
    assert len(rows) == 2 and rows[0].generations == 0 and math.isnan(rows[0].speedup) and rows[0].failed == 1


def test_early_speedup_averages_by_iteration():
    records = [{"method": "leap", "trial_rewards": [0.5, 1.0, 1.5]}, {"method": "leap", "trial_rewards": [1.5, 2.0]},
               {"method": "swift", "trial_rewards": [0.2]}, {"method": "ar"}]
    assert early_speedup(records) == {"leap": [1.0, 1.5, 1.5], "swift": [0.2]}


def test_plain_generations_timed_on_a_busy_machine_are_named():
    """docs/data/search_pays/t1_128: plain decoding took 136 s for 128 tokens on one prompt (5-7 s on most) and the
    report printed the ratios without a word. A generation > 3x slower than the median is named (per token of its
    wall time where records carry no steps)."""
    from leap.bench.report import busy_prompts, busy_warning

    def plain(q, tokens, seconds):
        return {"kind": "answer", "status": "ok", "method": "ar", "question_id": q, "category": "stem",
                "new_tokens": tokens, "wall_time_s": seconds}

    quiet = [plain(q, 128, 6.0 + 0.3 * q) for q in range(6)]
    assert busy_prompts(quiet) == [] and busy_warning(quiet) == ""
    busy = quiet + [plain(99, 128, 40.0), plain(98, 10, 0.6)]  # 98: short but at the usual per-token speed
    assert [r["question_id"] for r in busy_prompts(busy)] == [99]
    assert "stem 99" in busy_warning(busy) and "busy" in busy_warning(busy)


def test_a_short_generation_after_a_long_prefill_is_not_called_busy():
    """Where records carry decoding's time and steps, the pace is a step's: a batch of long prompts whose rows stopped
    after a few tokens is slow per token of its wall time (the prefill) but not busy
    (docs/data/regret-xeon-9b7f036/b4-t1, batch ``b19``); a generation whose steps ran 3x slower still is."""
    from leap.bench.report import busy_prompts

    def plain(q, tokens, steps, prefill, decode):
        return {"kind": "answer", "status": "ok", "method": "ar", "question_id": q, "category": "rag",
                "new_tokens": tokens, "steps": steps, "prefill_s": prefill, "decode_s": decode,
                "wall_time_s": prefill + decode}

    runs = [plain(q, 512, 128, 0.6, 8.0 + 0.4 * q) for q in range(6)]
    long_prefill = plain(19, 32, 16, 2.6, 0.9)
    assert busy_prompts(runs + [long_prefill]) == []
    assert [r["question_id"] for r in busy_prompts(runs + [long_prefill, plain(7, 512, 128, 0.6, 40.0)])] == [7]
