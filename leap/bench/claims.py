"""Claims in the README and docs, recomputed from the benchmark records they cite.

A figure in the prose is tied to its records by an HTML comment (invisible once rendered) right before it:

    <!--claim docs/data/lowbit_v2/t0 lowbit speedup-->**1.87x [1.65, 2.12]**
    <!--claim docs/data/lowbit_v2/t0 lowbit M-->6.38
    <!--claim docs/data/lowbit_v2/t0 lowbit lossless-->39/39

``DIR`` holds a ``records.jsonl`` written by ``leap bench``; ``METHOD`` is a method name in it; the
optional fourth word is a category (default ``overall``); the quantity is ``speedup`` (the pooled speedup
and its 95% interval, formatted as ``leap report`` prints them), ``ratio`` (the mean of per-prompt speedups
and its interval), ``M`` (mean accepted length, two
decimals) or ``lossless`` (``k/n`` greedy generations token-identical to plain decoding, of those
checked). ``speedup over METHOD`` (or ``ratio over METHOD``) takes the ratio to another method of the run instead
of plain decoding, paired by prompt (``leap report DIR --baseline METHOD``). The figure follows the comment at once (``**`` or spaces between at most); a marker with nothing
after it states nothing, and is reported.

:func:`check_claims` recomputes every claim with :func:`leap.bench.report.summarise` and lists those that
differ; ``python -m leap.bench.claims [FILES]`` prints them (exit 1 if any), and
``tests/bench/test_claims.py`` runs it over the README and docs, so a figure edited by hand, or records
re-run without the prose, turns the test suite red.

Beyond claims, every speed figure in the prose must say where it comes from. Two more forms (invisible once
rendered):

* a **report block**: ``<!--report DIR-->`` (or ``<!--report DIR T=1-->`` where the records hold several
  temperatures) on its own line, followed by a table that ``leap report DIR`` prints (Table 1 or Table 2,
  its caption line optional). Every row must equal the row ``leap report`` prints for the same method now; a
  block may show a subset of the methods. ``python -m leap.bench.claims --fix`` rewrites each block from its
  records (keeping its methods), so a stale table is regenerated, never edited by hand;
* a **quote**: ``<!--quote SOURCE-->1.7-2.0x``, a figure that is not leap's measurement (a paper's, an
  issue's target), with its source named. A quote is never recomputed; it says whose the figure is.

:func:`unmarked` finds every figure outside claims, report blocks and quotes (and outside code): a
**figure** is a number followed by ``x`` (``1.87x``, ``2x``, ``1.7-2.0x``). Other numbers (M, milliseconds,
k/n) are checked only where a claim marks them. ``python -m leap.bench.claims`` checks all three and lists
unmarked figures (exit 1 if any); ``tests/bench/test_figures.py`` runs it over the README and docs.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Claim", "find_claims", "check_claims", "Figure", "ReportBlock", "unmarked", "report_blocks", "check_blocks",
           "fix_blocks", "main"]

_MARKER = re.compile(r"<!--claim\s+(\S+)\s+(\S+)\s+(?:(\S+)\s+)?(speedup|ratio|M|lossless)(?:\s+over\s+(\S+))?\s*-->")
_PATTERNS = {"speedup": re.compile(r"\d+\.\d\dx(?: \[\d+\.\d\d, \d+\.\d\d\])?"),
             "ratio": re.compile(r"\d+\.\d\dx(?: \[\d+\.\d\d, \d+\.\d\d\])?"),
             "M": re.compile(r"\d+\.\d\d"), "lossless": re.compile(r"\d+/\d+")}


@dataclass(frozen=True)
class Claim:
    file: str
    line: int
    records: str
    method: str
    category: str
    quantity: str
    stated: str  # the figure as the prose states it ("" when none follows the marker)
    baseline: str = "ar"  # ``over METHOD``: the ratio is to that method, paired by prompt


def find_claims(path: str | Path) -> list[Claim]:
    """Every claim marker in the markdown file ``path``, with the figure that follows it."""
    text = Path(path).read_text()
    out = []
    for match in _MARKER.finditer(text):
        records, method, category, quantity, baseline = match.groups()
        # the figure starts right after the marker (bold or spaces between at most): a marker with no figure of
        # its own must not borrow the next claim's
        figure = re.compile(r"[\s*_]*(" + _PATTERNS[quantity].pattern + ")").match(text, match.end())
        out.append(Claim(str(path), text.count("\n", 0, match.start()) + 1, records, method, category or "overall",
                         quantity, figure.group(1) if figure else "", baseline or "ar"))
    return out


def _recomputed(claim: Claim, root: Path, cache: dict) -> str:
    from leap.bench.records import read_records
    from leap.bench.report import _interval, summarise

    folder = root / claim.records
    if (folder, claim.baseline) not in cache:
        cache[folder, claim.baseline] = summarise(read_records(folder), baseline=claim.baseline)
    rows = [r for r in cache[folder, claim.baseline] if r.method == claim.method and r.category == claim.category]
    if len(rows) != 1:
        return f"<no single row for {claim.method}/{claim.category} in {claim.records}>"
    row = rows[0]
    if claim.quantity == "speedup":
        return _interval(row.speedup, row.speedup_ci_low, row.speedup_ci_high)
    if claim.quantity == "ratio":
        return _interval(row.mean_ratio, row.mean_ratio_ci_low, row.mean_ratio_ci_high)
    if claim.quantity == "M":
        return f"{row.mean_accepted:.2f}"
    return row.lossless


def check_claims(files: list[str | Path], root: str | Path = ".") -> list[tuple[Claim, str]]:
    """``(claim, recomputed)`` for every claim in ``files`` whose stated figure differs from its records."""
    cache: dict = {}
    wrong = []
    for path in files:
        for claim in find_claims(path):
            value = _recomputed(claim, Path(root), cache)
            if claim.stated != value:
                wrong.append((claim, value))
    return wrong


FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x(?!\w)")
_CLAIM = re.compile(r"<!--claim\s[^>]*-->[\s*_]*\d+\.\d\dx(?: \[\d+\.\d\d, \d+\.\d\d\])?")
_QUOTE = re.compile(r"<!--quote\s+\S[^>]*-->[\s*_~<>=]*" + FIGURE.pattern)
_REPORT = re.compile(r"^<!--report\s+(\S+)(?:\s+T=(\S+))?\s*-->\s*$")
_CODE_BLOCK = re.compile(r"^```.*?^```", re.S | re.M)
_CODE_SPAN = re.compile(r"`[^`\n]*`")


@dataclass(frozen=True)
class Figure:
    file: str
    line: int
    text: str  # the figure as written
    context: str  # the line it stands on


@dataclass
class ReportBlock:
    file: str
    line: int  # the marker's line (1-based)
    records: str
    temperature: float | None
    start: int  # index of the marker line
    end: int  # index one past the table's last line
    rows: list[str]  # the table's lines (header, rule, rows)


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))  # keep offsets and line numbers


def unmarked(path: str | Path) -> list[Figure]:
    """Every figure in the markdown file ``path`` that no claim, report block or quote accounts for."""
    text = Path(path).read_text()
    lines = text.splitlines()
    for block in report_blocks(path):
        for i in range(block.start, block.end):
            lines[i] = " " * len(lines[i])
    masked = "\n".join(lines)
    for pattern in (_CODE_BLOCK, _CLAIM, _QUOTE, _CODE_SPAN):
        masked = pattern.sub(_blank, masked)
    out = []
    original = text.splitlines()
    for match in FIGURE.finditer(masked):
        line = masked.count("\n", 0, match.start())
        out.append(Figure(str(path), line + 1, match.group(0), original[line].strip()[:160]))
    return out


def report_blocks(path: str | Path) -> list[ReportBlock]:
    """The ``<!--report DIR-->`` blocks of ``path``: the marker, an optional caption, the table after it."""
    lines = Path(path).read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        match = _REPORT.match(line)
        if not match:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("|") and j - i <= 3:  # caption and blank lines
            j += 1
        k = j
        while k < len(lines) and lines[k].startswith("|"):
            k += 1
        temperature = float(match.group(2)) if match.group(2) is not None else None
        out.append(ReportBlock(str(path), i + 1, match.group(1), temperature, i, k, lines[j:k]))
    return out


def _rendered(folder: Path) -> list[tuple[float | None, str, list[str]]]:
    """``(temperature, caption, table lines)`` for every table ``leap report`` prints for ``folder``."""
    from leap.bench.records import read_records
    from leap.bench.report import summarise, table1_markdown, table2_markdown

    rows = summarise(read_records(folder))
    tables: list[tuple[float | None, str, list[str]]] = []
    caption, temperature, current = "", None, None
    for line in (table1_markdown(rows) + "\n" + table2_markdown(rows)).splitlines():
        if line.startswith("**T = "):
            caption, temperature = line, float(line[len("**T = "):].split("*")[0])
        elif line.startswith("|"):
            if current is None:
                current = []
                tables.append((temperature, caption, current))
            current.append(line)
        else:
            if current is not None:
                caption, temperature = "", None  # Table 2 follows Table 1 without a caption
            current = None
    return tables


def _method(row: str) -> str:
    return row.split("|")[1].strip()


def _match(block: ReportBlock, root: Path, cache: dict, relax: bool = False) -> tuple[str, list[str]] | str:
    """The caption and table this block must equal, or why there is none (``relax``: the header may differ,
    for :func:`fix_blocks` replacing a table that ``leap report`` printed with other columns)."""
    folder = root / block.records
    if not (folder / "records.jsonl").exists() and not folder.is_file():
        return f"no records at {block.records}"
    if folder not in cache:
        cache[folder] = _rendered(folder)
    if not block.rows:
        return "no table follows the marker"
    tables = [(c, t) for temp, c, t in cache[folder] if block.temperature is None or temp == block.temperature]
    candidates = [(c, t) for c, t in tables if t[0] == block.rows[0]]
    if not candidates and relax and _method(block.rows[0]) == "method":
        candidates = [(c, t) for c, t in tables if c]  # Table 1 of that temperature, whatever its columns were
    where = f" (T={block.temperature:g})" if block.temperature is not None else ""
    if not candidates:
        return f"leap report {block.records} prints no table with this header{where}"
    if len(candidates) > 1:
        return f"several tables of {block.records} fit: name one with T=... in the marker"
    caption, table = candidates[0]
    methods = [_method(r) for r in block.rows[2:]]
    by_method = {_method(r): r for r in table[2:]}
    return caption, table[:2] + [by_method.get(m, f"| {m} | <not in the records> |") for m in methods]


def check_blocks(files: list[str | Path], root: str | Path = ".") -> list[tuple[ReportBlock, str]]:
    """``(block, what differs)`` for every report block whose table is not what its records give now."""
    cache: dict = {}
    wrong = []
    for path in files:
        for block in report_blocks(path):
            want = _match(block, Path(root), cache)
            if isinstance(want, str):
                wrong.append((block, want))
                continue
            for have, should in zip(block.rows, want[1]):
                if have != should:
                    wrong.append((block, f"states {have!r}, records give {should!r}"))
                    break
    return wrong


def fix_blocks(path: str | Path, root: str | Path = ".") -> int:
    """Rewrite every report block of ``path`` from its records (same methods); returns how many changed."""
    lines = Path(path).read_text().splitlines()
    changed = 0
    cache: dict = {}
    for block in reversed(report_blocks(path)):
        want = _match(block, Path(root), cache, relax=True)
        if isinstance(want, str):
            raise SystemExit(f"{block.file}:{block.line}: {want}")
        caption, table = want
        new = [lines[block.start]] + ([caption, ""] if caption else []) + table
        if lines[block.start:block.end] != new:
            lines[block.start:block.end] = new
            changed += 1
    Path(path).write_text("\n".join(lines) + "\n")
    return changed


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    files = [a for a in args if a != "--fix"] or ["README.md", *sorted(map(str, Path("docs").glob("*.md"))),
                                                  *sorted(map(str, Path("experiments").glob("*/NOTES.md")))]
    if "--fix" in args:
        for f in files:
            if (n := fix_blocks(f)):
                print(f"{f}: {n} report blocks rewritten from their records")
    wrong = check_claims(files)
    for claim, value in wrong:
        print(f"{claim.file}:{claim.line}: {claim.method} {claim.quantity} ({claim.records}): "
              f"states {claim.stated or 'nothing'}, records give {value}")
    blocks = check_blocks(files)
    for block, why in blocks:
        print(f"{block.file}:{block.line}: report block ({block.records}): {why}")
    loose = [fig for f in files for fig in unmarked(f)]
    for fig in loose:
        print(f"{fig.file}:{fig.line}: unmarked figure {fig.text} (a claim, report block or quote states its "
              f"source): {fig.context}")
    claims = sum(len(find_claims(f)) for f in files)
    print(f"{claims} claims checked, {len(wrong)} differ from their records; {len(blocks)} report blocks differ "
          f"(--fix rewrites them); {len(loose)} unmarked figures")
    return 1 if wrong or blocks or loose else 0


if __name__ == "__main__":
    raise SystemExit(main())
