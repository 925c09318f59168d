"""What a batch method's all-in tally said its drafting steps gave over plain decoding, and what they gave timed
against ``ar``'s steps in the same batch: per batch and over the run, from the records alone.

The tally (:class:`~leap.core.policies.loss_budget.DraftingTally`) counts each drafting step's tokens a row at the
bandit's bar for its row count, as recorded after the batch (``batch_plain_rate``). Here the same steps are counted
at ``ar``'s seconds a step in that batch (its decode time over its steps, at the full rows), scaled to the step's rows
by the shape of a plain step's cost over rows in ``docs/data/batch_costs.json`` (one token a row). Beside both, the
batch's wall-time ratio to ``ar``'s (what the regret table reads).

Usage: python experiments/2026-12-03-batch-bar/tallies.py RUN_DIR [METHOD ...]  (default: every batch method)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COSTS = Path(__file__).resolve().parents[2] / "docs" / "data" / "batch_costs.json"


def plain_cost():
    """``rows ->`` a plain step's cost (ms), interpolated linearly between the measured row counts."""
    points = sorted((r["batch"], r["ms"]) for r in json.loads(COSTS.read_text())["rows"] if r["tokens_per_row"] == 1)

    def cost(rows: int) -> float:
        for (r0, c0), (r1, c1) in zip(points, points[1:]):
            if rows <= r1:
                return c0 + (c1 - c0) * (rows - r0) / (r1 - r0)
        (r0, c0), (r1, c1) = points[-2:]
        return c0 + (c1 - c0) * (rows - r0) / (r1 - r0)
    return cost


def main(folder: str, methods: list[str]) -> None:
    cost = plain_cost()
    answers = [json.loads(line) for line in open(f"{folder}/records.jsonl")]
    answers = [r for r in answers if r.get("kind") == "answer"]
    ar = {r["question_id"]: r for r in answers if r["method"] == "ar"}
    methods = methods or sorted({r["method"] for r in answers if "batch_caps" in r and r["method"] != "ar"})
    for method in methods:
        total = [0.0, 0.0, 0.0]
        cells = []
        for r in (r for r in answers if r["method"] == method):
            plain = ar[r["question_id"]]
            step = plain["decode_s"] / plain["steps"]
            rates = {int(k): v for k, v in r.get("batch_plain_rate", {}).items()}
            seconds = by_bar = by_ar = 0.0
            for cap, rows, committed, s in zip(r["batch_caps"], r["batch_step_rows"], r["batch_step_committed"],
                                               r["batch_step_s"]):
                if cap and rates.get(rows):
                    seconds += s
                    by_bar += committed / rows / rates[rows]
                    by_ar += committed / rows * step * cost(rows) / cost(r["batch_size"])
            for i, v in enumerate((seconds, by_bar, by_ar)):
                total[i] += v
            if seconds:
                cells.append(f"{r['question_id']} {plain['wall_time_s'] / r['wall_time_s']:.2f} "
                             f"{by_bar / seconds:.2f} {by_ar / seconds:.2f}")
        if total[0]:
            print(f"{method}: tally by its bar {total[1] / total[0]:.2f}, by ar's steps {total[2] / total[0]:.2f}")
            print("   batch: wall over ar's, by its bar, by ar's steps |", " | ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
