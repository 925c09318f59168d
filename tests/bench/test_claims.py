"""Figures in the README and docs equal what their records give (leap.bench.claims)."""

from __future__ import annotations

from pathlib import Path

import pytest

from leap.bench.claims import check_claims, find_claims, main

ROOT = Path(__file__).resolve().parents[2]
NOTES = ROOT / "experiments" / "2026-11-26-cpu-measurements" / "NOTES.md"  # the lab log, markers and all
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "experiments").glob("*/NOTES.md"))]


def test_every_marked_figure_equals_its_records():
    assert len(find_claims(NOTES)) >= 20 and len(find_claims(ROOT / "README.md")) >= 8  # the results are marked
    wrong = check_claims(DOCS, root=ROOT)
    assert not wrong, "\n".join(f"{c.file}:{c.line} {c.method} {c.quantity}: states {c.stated!r}, records give "
                                f"{v!r}" for c, v in wrong)


def test_a_figure_edited_by_hand_is_caught(tmp_path, capsys):
    text = NOTES.read_text()
    marker = "<!--claim docs/data/lowbit_v2/t0 lowbit speedup-->"
    stated = next(c.stated for c in find_claims(NOTES)
                  if c.records == "docs/data/lowbit_v2/t0" and c.method == "lowbit" and c.quantity == "speedup")
    edited = tmp_path / "README.md"
    edited.write_text(text.replace(marker + stated[:4], marker + "2.97", 1)
                      .replace("<!--claim docs/data/lowbit_v2/t0 lowbit lossless-->39/39",
                               "<!--claim docs/data/lowbit_v2/t0 lowbit lossless-->40/40", 1)
                      .replace("<!--claim docs/data/lowbit_v2/t0 gated speedup-->",
                               "<!--claim docs/data/lowbit_v2/t0 no-such-method speedup-->", 1))
    wrong = check_claims([edited], root=ROOT)
    assert sorted((c.method, c.quantity) for c, _ in wrong) == [("lowbit", "lossless"), ("lowbit", "speedup"),
                                                                 ("no-such-method", "speedup")]
    import os

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main([str(edited)]) == 1 and main([str(ROOT / "README.md")]) == 0
    finally:
        os.chdir(cwd)
    assert "states 2.97" in capsys.readouterr().out


def test_a_marker_with_no_figure_of_its_own_is_caught(tmp_path):
    """Issue 33's plant: a marker whose figure was deleted borrowed the next figure within 200 characters."""
    text = NOTES.read_text()
    marker = "<!--claim docs/data/lowbit_v2/t0 lowbit M-->"
    start = text.index(marker) + len(marker)
    stated = next(c for c in find_claims(NOTES) if c.method == "lowbit" and c.quantity == "M").stated
    edited = tmp_path / "README.md"
    edited.write_text(text[:start] + " (see below)" + text[start + len(stated):])
    wrong = check_claims([edited], root=ROOT)
    assert [(c.method, c.quantity, c.stated) for c, _ in wrong] == [("lowbit", "M", "")]


def test_a_speedup_over_another_method_is_paired_and_recomputed(tmp_path):
    """``leap report --baseline M`` / ``<!--claim ... speedup over M-->``: ratios to another method of the run."""
    from leap.bench.records import read_records
    from leap.bench.report import summarise

    records = read_records(ROOT / "docs/data/lowbit_formats/t0")
    over_plain = {r.method: r for r in summarise(records) if r.category == "overall"}
    over_lowbit = {r.method: r for r in summarise(records, baseline="lowbit") if r.category == "overall"}
    assert over_lowbit["lowbit"].speedup == pytest.approx(1.0)
    # pooled ratios over the same paired prompts compose: (q8 / lowbit) = (q8 / ar) / (lowbit / ar)
    assert over_lowbit["lowbit-q8_0"].speedup == pytest.approx(
        over_plain["lowbit-q8_0"].speedup / over_plain["lowbit"].speedup)
    assert over_lowbit["ar"].speedup == pytest.approx(1 / over_plain["lowbit"].speedup)
    doc = tmp_path / "doc.md"
    q8 = over_lowbit["lowbit-q8_0"]
    figure = f"{q8.speedup:.2f}x [{q8.speedup_ci_low:.2f}, {q8.speedup_ci_high:.2f}]"
    doc.write_text(f"<!--claim docs/data/lowbit_formats/t0 lowbit-q8_0 speedup over lowbit-->{figure}\n")
    assert find_claims(doc)[0].baseline == "lowbit" and not check_claims([doc], root=ROOT)
    doc.write_text(f"<!--claim docs/data/lowbit_formats/t0 lowbit-q8_0 speedup-->{figure}\n")  # over plain: differs
    assert check_claims([doc], root=ROOT)
