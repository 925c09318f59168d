"""leap.data: data shipped inside the package - the Spec-Bench prompt set.

Owns ``spec_bench/question.jsonl`` (480 questions in 13 categories; Apache-2.0, source and commit in
``spec_bench/SOURCE.md``, licence beside it), :func:`load_prompts` and :func:`pick_per_category`,
which ``leap bench``, ``leap redundancy``, the environments and the benchmarks read. Evaluation
prompts only: nothing is trained or tuned on them.

May import: the foundations of :mod:`leap.core` only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

__all__ = ["SPEC_BENCH", "load_prompts", "pick_per_category"]

SPEC_BENCH = Path(__file__).parent / "spec_bench" / "question.jsonl"


def load_prompts(path: str | Path | None = None) -> list[dict]:
    """Rows of a Spec-Bench-style JSONL file (default: the shipped Spec-Bench set).

    Raises:
        LeapError: the file is missing, or a row lacks ``question_id``, ``category`` or ``turns``.
    """
    from leap.core.errors import LeapError

    path = Path(path) if path is not None else SPEC_BENCH
    if not path.is_file():
        raise LeapError(f"prompt file {path} does not exist; give a JSONL file with question_id, category, turns")
    rows = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise LeapError(f"prompt file {path} is not UTF-8 text (byte {err.start}); save it as UTF-8 JSONL") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise LeapError(f"{path}:{n}: not a JSON object ({err.msg}); one prompt per line") from None
        if not isinstance(row, dict):
            raise LeapError(f"{path}:{n}: not a JSON object; one prompt per line")
        missing = {"question_id", "category", "turns"} - set(row)
        if missing or not row.get("turns"):
            raise LeapError(f"{path}:{n}: each prompt needs question_id, category and non-empty turns")
        turns = row["turns"]
        if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
            raise LeapError(f"{path}:{n}: turns must be a list of strings, one per user turn "
                            f'(e.g. "turns": ["Hello"]); got a {type(turns).__name__}')
        rows.append(row)
    return rows


def pick_per_category(rows: Iterable[dict], per_category: int | None,
                      categories: Iterable[str] | None = None) -> list[dict]:
    """The first ``per_category`` rows of each category (in file order; None: all), optionally only ``categories``."""
    wanted = None if categories is None else list(categories)
    counts: dict[str, int] = {}
    out = []
    for row in rows:
        cat = row["category"]
        if wanted is not None and cat not in wanted:
            continue
        if per_category is None or counts.get(cat, 0) < per_category:
            counts[cat] = counts.get(cat, 0) + 1
            out.append(row)
    return out
