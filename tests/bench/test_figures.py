"""Every speed figure in the README and docs is a claim, a report block or a named quote (leap.bench.claims)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from leap.bench.claims import check_blocks, fix_blocks, main, report_blocks, unmarked

ROOT = Path(__file__).resolve().parents[2]
NOTES = ROOT / "experiments" / "2026-11-26-cpu-measurements" / "NOTES.md"  # the lab log, markers and all
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "experiments").glob("*/NOTES.md"))]
RECORDS = "docs/data/zone_metrics"  # a leap bench folder with one temperature


def test_no_unmarked_figure_in_readme_and_docs():
    loose = [f for path in DOCS for f in unmarked(path)]
    assert not loose, "\n".join(f"{f.file}:{f.line}: {f.text}: {f.context}" for f in loose[:20])


def test_every_report_block_equals_what_leap_report_prints():
    assert sum(len(report_blocks(p)) for p in DOCS) >= 8
    wrong = check_blocks(DOCS, root=ROOT)
    assert not wrong, "\n".join(f"{b.file}:{b.line}: {why}" for b, why in wrong)


@pytest.mark.parametrize("text, flagged", [
    ("the search gave 1.72x on the prompt", ["1.72x"]),
    ("a range of 1.5-1.6x, and 2x faster", ["1.5-1.6x", "2x"]),
    ("<!--claim docs/data/x lowbit speedup-->**1.87x [1.65, 2.12]** and then 1.10x", ["1.10x"]),
    ("<!--quote LEAP paper-->1.7-2.0x on Llama-3", []),
    ("<!--quote-->1.7x with no source named", ["1.7x"]),
    ("target <!--quote issue 34-->>= 2.5x", []),
    ("`--spec 1.5x` in code, x86_64 and 0x1F and B x 8", []),
    ("```bash\nleap bench  # 1.9x\n```\nafter 1.2x", ["1.2x"]),
])
def test_unmarked_finds_exactly_the_figures_without_a_source(tmp_path, text, flagged):
    path = tmp_path / "doc.md"
    path.write_text(text + "\n")
    assert [f.text for f in unmarked(path)] == flagged


def _block(tmp_path: Path, rows: list[str], marker: str = f"<!--report {RECORDS}-->") -> Path:
    from leap.bench.claims import _rendered

    table = next(t for temp, c, t in _rendered(ROOT / RECORDS) if c)
    path = tmp_path / "doc.md"
    path.write_text("Intro.\n\n" + marker + "\n" + "\n".join(table[:2] + [r for r in table[2:]
                                                                          if r.split("|")[1].strip() in rows])
                    + "\n\nAfter.\n")
    return path


def test_a_report_block_edited_by_hand_is_caught_and_fix_rewrites_it(tmp_path):
    path = _block(tmp_path, ["ar", "leap", "leap-norm"])
    assert not check_blocks([path], root=ROOT) and not unmarked(path)  # a subset of the methods may be shown
    text = path.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| leap |"))
    edited = row.replace("x [", "x [0.", 1) if "x [0" not in row else row.replace("x [0", "x [1", 1)
    path.write_text(text.replace(row, edited))
    wrong = check_blocks([path], root=ROOT)
    assert len(wrong) == 1 and "records give" in wrong[0][1]
    assert fix_blocks(path, root=ROOT) == 1
    assert path.read_text().count(row) == 1 and not check_blocks([path], root=ROOT)
    assert path.read_text().startswith("Intro.\n\n") and path.read_text().rstrip().endswith("After.")


def test_a_block_naming_a_method_the_records_lack_or_no_records_is_caught(tmp_path):
    path = _block(tmp_path, ["ar", "leap"])
    path.write_text(path.read_text().replace("| leap |", "| leap-renamed |"))
    assert "not in the records" in check_blocks([path], root=ROOT)[0][1]
    path.write_text(path.read_text().replace(RECORDS, "docs/data/no-such-run"))
    assert "no records" in check_blocks([path], root=ROOT)[0][1]


def test_a_figure_under_a_report_marker_but_outside_its_table_is_unmarked(tmp_path):
    path = _block(tmp_path, ["ar", "leap"])
    path.write_text(path.read_text().replace("After.", "After: leap ran at 0.94x."))
    assert [f.text for f in unmarked(path)] == ["0.94x"]


def test_main_exits_nonzero_on_an_unmarked_figure(tmp_path, capsys):
    path = tmp_path / "doc.md"
    path.write_text("leap is 3.10x faster\n")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main([str(path)]) == 1
        assert main([str(ROOT / "README.md")]) == 0
    finally:
        os.chdir(cwd)
    assert "unmarked figure 3.10x" in capsys.readouterr().out
