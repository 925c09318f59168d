"""Claims in the README and docs, recomputed from the benchmark records they cite.

A figure in the prose is tied to its records by an HTML comment (invisible once rendered) right before it:

    <!--claim docs/data/lowbit_v2/t0 lowbit speedup-->**1.87x [1.65, 2.12]**
    <!--claim docs/data/lowbit_v2/t0 lowbit M-->6.38
    <!--claim docs/data/lowbit_v2/t0 lowbit lossless-->39/39

``DIR`` holds a ``records.jsonl`` written by ``leap bench``; ``METHOD`` is a method name in it; the
optional fourth word is a category (default ``overall``); the quantity is ``speedup`` (the pooled speedup
and its 95% interval, formatted as ``leap report`` prints them), ``M`` (mean accepted length, two
decimals) or ``lossless`` (``k/n`` greedy generations token-identical to plain decoding, of those
checked). The figure follows the comment at once (``**`` or spaces between at most); a marker with nothing
after it states nothing, and is reported.

:func:`check_claims` recomputes every claim with :func:`leap.bench.report.summarise` and lists those that
differ; ``python -m leap.bench.claims [FILES]`` prints them (exit 1 if any), and
``tests/bench/test_claims.py`` runs it over the README and docs, so a figure edited by hand, or records
re-run without the prose, turns the test suite red.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Claim", "find_claims", "check_claims", "main"]

_MARKER = re.compile(r"<!--claim\s+(\S+)\s+(\S+)\s+(?:(\S+)\s+)?(speedup|M|lossless)\s*-->")
_PATTERNS = {"speedup": re.compile(r"\d+\.\d\dx(?: \[\d+\.\d\d, \d+\.\d\d\])?"),
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


def find_claims(path: str | Path) -> list[Claim]:
    """Every claim marker in the markdown file ``path``, with the figure that follows it."""
    text = Path(path).read_text()
    out = []
    for match in _MARKER.finditer(text):
        records, method, category, quantity = match.groups()
        # the figure starts right after the marker (bold or spaces between at most): a marker with no figure of
        # its own must not borrow the next claim's
        figure = re.compile(r"[\s*_]*(" + _PATTERNS[quantity].pattern + ")").match(text, match.end())
        out.append(Claim(str(path), text.count("\n", 0, match.start()) + 1, records, method, category or "overall",
                         quantity, figure.group(1) if figure else ""))
    return out


def _recomputed(claim: Claim, root: Path, cache: dict) -> str:
    from leap.bench.records import read_records
    from leap.bench.report import _interval, summarise

    folder = root / claim.records
    if folder not in cache:
        cache[folder] = summarise(read_records(folder))
    rows = [r for r in cache[folder] if r.method == claim.method and r.category == claim.category]
    if len(rows) != 1:
        return f"<no single row for {claim.method}/{claim.category} in {claim.records}>"
    row = rows[0]
    if claim.quantity == "speedup":
        return _interval(row.speedup, row.speedup_ci_low, row.speedup_ci_high)
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


def main(argv: list[str] | None = None) -> int:
    files = (argv if argv is not None else sys.argv[1:]) or ["README.md", *sorted(map(str, Path("docs").glob("*.md")))]
    wrong = check_claims(files)
    for claim, value in wrong:
        print(f"{claim.file}:{claim.line}: {claim.method} {claim.quantity} ({claim.records}): "
              f"states {claim.stated or 'nothing'}, records give {value}")
    claims = sum(len(find_claims(f)) for f in files)
    print(f"{claims} claims checked, {len(wrong)} differ from their records")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
