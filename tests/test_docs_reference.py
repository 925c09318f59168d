"""docs/ is reference, experiments/ is the log: the reference pages carry no dated history, and every record under
docs/data is cited by some page, script or note (a record nothing cites is one nobody can check)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# docs/results.md holds the generated tables, each with the commit and command that produced it.
REFERENCE = sorted(p for p in DOCS.glob("*.md") if p.name != "results.md")
HISTORY = {
    "a commit hash": re.compile(r"`[0-9a-f]{7,40}(\+dirty)?`"),
    "an issue number": re.compile(r"\bissues? \d+\b", re.IGNORECASE),
    "a dated section": re.compile(r"\*\*Dated\.?\*\*|^> Dated", re.MULTILINE),
    "a date": re.compile(r"(?<![-/\w])20\d\d-\d\d-\d\d(?![-\w])"),
}


def history_in(text: str) -> list[str]:
    """What in ``text`` is history rather than reference: ``"<kind>: <the match>"`` per finding. Links into
    experiments/ (whose folders are dated) are the way a reference page points at its history, so they pass."""
    text = re.sub(r"experiments/\d{4}-\d\d-\d\d-[\w.-]+", "experiments/FOLDER", text)
    return [f"{kind}: {m.group(0)}" for kind, pattern in HISTORY.items() for m in pattern.finditer(text)]


@pytest.mark.parametrize("page", REFERENCE, ids=lambda p: p.name)
def test_reference_pages_carry_no_history(page):
    assert history_in(page.read_text()) == []


@pytest.mark.parametrize("text", ["measured at commit `5266697`", "since issue 35", "> **Dated.** Produced at",
                                  "Commit `e865fca`, 2026-11-22;", "records read `b7d040d+dirty`"])
def test_history_is_caught(text):
    assert history_in(text)


def test_a_link_to_an_experiment_is_not_history():
    assert history_in("[the notebook](../experiments/2026-11-26-search-notebook/NOTES.md), llama.cpp #20824") == []


def _tracked_text() -> str:
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    suffixes = (".md", ".py", ".sh", ".toml")
    return "\n".join((ROOT / f).read_text(errors="ignore") for f in files
                     if f.endswith(suffixes) and not f.startswith("docs/data/") and (ROOT / f).is_file())


def uncited(entries: list[str], text: str) -> list[str]:
    """The entries of docs/data (file or folder names) that no text names: a file by its path with or without its
    suffix, a folder by its path."""
    missing = []
    for name in entries:
        path = f"docs/data/{name}"
        stem = path.rsplit(".", 1)[0] if "." in name else path
        if not re.search(re.escape(stem) + r"(?![\w-])", text):
            missing.append(path)
    return missing


def test_every_record_under_docs_data_is_cited():
    entries = sorted(p.name for p in (DOCS / "data").iterdir())
    assert uncited(entries, _tracked_text()) == []


def test_an_uncited_record_is_caught():
    text = "see docs/data/batch_search_seed_b8.json and docs/data/zone_metrics"
    assert uncited(["batch_search_seed_b8.json", "batch_search_seed_b8_v2.json", "zone_metrics"], text) == [
        "docs/data/batch_search_seed_b8_v2.json"]
