"""The search's regret table (leap.bench.regret): per condition, the search over the best fixed choice of its run."""

from __future__ import annotations

import json

import pytest

from leap.bench.regret import always_close, regret_markdown, regret_rows
from leap.core.errors import LeapError


def _run(folder, seconds: dict[str, list[float]], batch_size: int = 1, search_key: bool = True,
         methods: list[str] | None = None):
    """A records folder: every method's per-prompt wall time for 64 tokens (plain decoding is ``ar``); ``methods``:
    the meta record's ``--methods`` entries (LABEL=NAME), by default the methods' own names."""
    folder.mkdir(parents=True)
    lines = [{"kind": "meta", "model": "m", "settings": {"batch_size": batch_size, "max_new_tokens": 64,
                                                         "methods": methods or list(seconds)},
              "machine": {"device": "cpu", "dtype": "float32"}, "provenance": {"commit": "c"}}]
    for method, times in seconds.items():
        for i, t in enumerate(times):
            rec = {"kind": "answer", "question_id": f"q{i}", "category": "c", "turn": 0, "temperature": 0.0, "run": 0,
                   "method": method, "status": "ok", "new_tokens": 64, "wall_time_s": t, "steps": 10,
                   "token_ids": [], "lossless": True}
            if method == "leap-drafters" and search_key:
                rec["search_iterations"] = 3
            lines.append(rec)
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return folder


def test_the_search_is_compared_with_the_best_fixed_choice_of_each_run(tmp_path):
    one = _run(tmp_path / "a", {"ar": [2.0, 2.2, 1.8, 2.0], "lowbit": [1.0, 1.1, 0.9, 1.0],
                                "suffix": [1.6, 1.7, 1.5, 1.6], "leap-drafters": [0.97, 1.16, 0.87, 1.06]})
    two = _run(tmp_path / "b", {"ar": [2.0, 2.1, 1.9, 2.0], "lowbit": [1.9, 2.0, 1.8, 1.9],
                                "suffix": [1.0, 1.05, 0.95, 1.0], "leap-drafters": [1.5, 1.6, 1.4, 1.5]},
               batch_size=4, search_key=False)  # batch records carry no search_iterations: known by its name
    rows = regret_rows([one, two])
    assert [(r.best, r.search, r.verdict) for r in rows] == [("lowbit", "leap-drafters", "level"),
                                                            ("suffix", "leap-drafters", "behind")]
    assert rows[0].best_speedup == pytest.approx(2.0, rel=0.02) and rows[0].ratio == pytest.approx(0.98, abs=0.02)
    assert rows[1].ratio == pytest.approx(1.0 / 1.5, abs=0.02) and "B = 4, 4 batches" in rows[1].condition
    assert always_close(rows) == []  # lowbit loses run b, suffix loses run a
    assert always_close(rows[:1]) == ["lowbit"]
    table = regret_markdown(rows)
    assert f"<!--claim {two} leap-drafters speedup over suffix-->0.67x" in table and "no fixed choice" in table


def test_a_search_within_five_percent_but_surely_behind_is_behind(tmp_path):
    """The verdict asks both: at least 0.95 of the best, and an interval that reaches 1.0 (a search 3% behind on
    every prompt is behind, not level)."""
    run = _run(tmp_path / "a", {"ar": [2.0, 2.2, 1.8, 2.0], "lowbit": [1.0, 1.1, 0.9, 1.0],
                                "leap-drafters": [1.03, 1.133, 0.927, 1.03]})
    (row,) = regret_rows([run])
    assert row.ratio == pytest.approx(0.97, abs=0.005) and row.high < 1.0 and row.verdict == "behind"


def test_a_run_without_a_search_is_named(tmp_path):
    with pytest.raises(LeapError, match="holds no search method"):
        regret_rows([_run(tmp_path / "a", {"ar": [2.0, 2.0, 2.0], "lowbit": [1.0, 1.0, 1.0]})])


def test_the_table_of_the_records_leap_ships_is_what_its_claims_say(tmp_path):
    """The regret table is generated with claim markers: the claims check recomputes every figure in it."""
    from pathlib import Path

    from leap.bench.claims import check_claims

    root = Path(__file__).resolve().parents[2]
    rows = regret_rows([root / "docs/data/direct_layers_rebaseline/t0_128"])
    doc = tmp_path / "regret.md"
    doc.write_text(regret_markdown(rows).replace(str(root) + "/", ""))
    assert not check_claims([doc], root=root)


def test_leap_report_regret_prints_the_table_and_one_folder_is_the_plain_report(tmp_path, capsys):
    from leap.cli import main

    one = _run(tmp_path / "a", {"ar": [2.0, 2.2, 1.8, 2.0], "lowbit": [1.0, 1.1, 0.9, 1.0],
                                "leap-drafters": [0.97, 1.16, 0.87, 1.06]})
    two = _run(tmp_path / "b", {"ar": [2.0, 2.1, 1.9, 2.0], "suffix": [1.0, 1.05, 0.95, 1.0],
                                "leap-drafters": [1.5, 1.6, 1.4, 1.5]})
    assert main(["report", str(one), str(two), "--regret"]) == 0
    out = capsys.readouterr().out
    assert out.count("| `leap-drafters` |") == 2 and "| level |" in out and "| behind |" in out
    with pytest.raises(SystemExit, match="one folder"):
        main(["report", str(one), str(two)])


def test_a_search_run_under_a_label_of_its_own_is_a_search(tmp_path):
    """``leap-drafters-prior=leap-drafters`` in a batch run (whose records carry no search_iterations) is the search
    from the prior, never a fixed choice that the search is measured against."""
    run = _run(tmp_path / "a", {"ar": [2.0, 2.0, 2.0], "lowbit": [1.2, 1.3, 1.1], "leap-drafters": [1.3, 1.4, 1.2],
                                "leap-drafters-prior": [1.0, 1.0, 1.0]}, batch_size=4, search_key=False,
               methods=["ar", "lowbit", "leap-drafters", "leap-drafters-prior=leap-drafters"])
    rows = regret_rows([run])
    assert [(r.best, r.search) for r in rows] == [("lowbit", "leap-drafters"), ("lowbit", "leap-drafters-prior")]


def test_a_run_of_one_prompt_is_judged_by_its_point_estimate_and_says_so(tmp_path):
    run = _run(tmp_path / "a", {"ar": [2.0], "lowbit": [1.0], "leap-drafters": [1.02]})
    (row,) = regret_rows([run])
    assert row.verdict == "level (one prompt, no interval)"
    run = _run(tmp_path / "b", {"ar": [2.0], "lowbit": [1.0], "leap-drafters": [1.2]})
    assert regret_rows([run])[0].verdict == "behind (one prompt, no interval)"
