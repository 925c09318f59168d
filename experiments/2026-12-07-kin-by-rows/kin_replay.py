"""Which of the kin ``lowbit`` and ``cascade`` the batch search's tally would stop after each batch, pooled over row
counts (as shipped before this experiment) and row count by row count (``by_rows``), replayed from the records with
leap's own :class:`~leap.core.policies.loss_budget.DraftingTally`; and each kin's steps against ``ar``'s in the same
batch, at the batch's full rows and at its tail.

Reads ``leap bench --batch-size B`` records (``records.jsonl`` in each DIR), decodes nothing. Two readings:

- default: per search method (``leap-drafters``, ``leap-drafters-prior``), batch by batch while both kin draft, each
  kin's counted steps and all-in speedup pooled, its speedup at the batch's full rows, and which kin each test would
  stop (``below`` at ``prune`` 1.0 and 0.95, both directions) - then which kin drafted the batches after.
- ``--truth``: every batch after the first, each kin's steps at full rows and at fewer rows: their number, their
  speedup by the search's bar (``batch_plain_rate``) and by ``ar``'s mean step at the same row count in the same batch.

Usage: python experiments/2026-12-07-kin-by-rows/kin_replay.py [--truth] DIR...
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from leap.core.policies.loss_budget import DraftingTally

KIN = ("lowbit", "cascade")
SEARCHES = ("leap-drafters", "leap-drafters-pooled", "leap-drafters-prior", "leap-drafters-prior-pooled")


def answers(folder: str) -> list[dict]:
    records = [json.loads(line) for line in Path(folder, "records.jsonl").read_text().splitlines()]
    return [r for r in records if r.get("kind") == "answer"]


def outcome(record: dict) -> SimpleNamespace:
    """The batch's steps as :meth:`DraftingTally.add` reads them, the kin numbered 0 and 1, other drafters 2."""
    number = {name: i for i, name in enumerate(KIN)}
    return SimpleNamespace(caps=record["batch_caps"], drafters=[number.get(d, 2) for d in record["batch_drafters"]],
                           step_rows=record["batch_step_rows"], step_s=record["batch_step_s"],
                           step_worth=record["batch_step_worth"])


def replay(folder: str) -> None:
    for method in SEARCHES:
        batches = [r for r in answers(folder) if r["method"] == method]
        if not batches:
            continue
        print(f"{folder} {method}")
        tally = DraftingTally()
        for i, record in enumerate(batches):
            rates = {int(rows): rate for rows, rate in record["batch_plain_rate"].items() if rate}
            tally.add(outcome(record), rates.get)
            drafted = Counter(d for d, cap in zip(record["batch_drafters"], record["batch_caps"]) if cap and d in KIN)
            full = record["batch_size"]
            at_full = {}
            for k in (0, 1):
                n, seconds, plain_s = tally.strata.get((k, full), [0, 0.0, 0.0])[:3]
                at_full[KIN[k]] = f"{plain_s / seconds:.2f}" if seconds else "-"
            pooled = {KIN[k]: f"{tally.speedup(k):.2f}" if tally.speedup(k) else "-" for k in (0, 1)}
            stops = {}
            for name, by_rows in (("pooled", False), ("by rows", True)):
                stops[name] = [KIN[a] for a, b in ((0, 1), (1, 0)) if tally.below(a, b, 1.0, 0.95, by_rows=by_rows)]
            counted = {KIN[k]: tally.moments.get(k, [0])[0] for k in (0, 1)}
            print(f"  batch {i}: drafted {dict(drafted)}; counted {counted}; pooled {pooled}; at {full} rows "
                  f"{at_full}; would stop: pooled {stops['pooled'] or '-'}, by rows {stops['by rows'] or '-'}")
            if len(drafted) < 2 and i > 0:
                after = Counter(d for r in batches[i:] for d, c in zip(r["batch_drafters"], r["batch_caps"])
                                if c and d in KIN)
                print(f"  from batch {i} on: {dict(after)} steps")
                break


def truth(folder: str) -> None:
    records = answers(folder)
    ar = {r["question_id"]: r for r in records if r["method"] == "ar"}
    for method in SEARCHES:
        parts: dict[tuple[str, str], list[float]] = {}
        for record in [r for r in records if r["method"] == method][1:]:
            plain = ar[record["question_id"]]
            ar_step: dict[int, list[float]] = {}
            for rows, seconds in zip(plain["batch_step_rows"], plain["batch_step_s"]):
                ar_step.setdefault(rows, []).append(seconds)
            rates = {int(rows): rate for rows, rate in record["batch_plain_rate"].items() if rate}
            for drafter, cap, rows, seconds, worth in zip(record["batch_drafters"], record["batch_caps"],
                                                          record["batch_step_rows"], record["batch_step_s"],
                                                          record["batch_step_worth"]):
                if cap and drafter in KIN and rows in rates and rows in ar_step:
                    where = "full" if rows == record["batch_size"] else "tail"
                    mine = parts.setdefault((drafter, where), [0, 0.0, 0.0, 0.0])
                    mine[0] += 1
                    mine[1] += seconds
                    mine[2] += worth / rates[rows]
                    mine[3] += worth * statistics.mean(ar_step[rows])
        cells = [f"{d} {w}: {n} steps {bar / s:.2f} by its bar, {real / s:.2f} by ar's"
                 for (d, w), (n, s, bar, real) in sorted(parts.items())]
        print(f"{folder} {method}: " + "; ".join(cells))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--truth":
        for folder in args[1:]:
            truth(folder)
    else:
        for folder in args:
            replay(folder)
