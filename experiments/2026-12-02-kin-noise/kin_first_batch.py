"""What the batch search's kin (``lowbit``, ``cascade``) measured, all in, in each run's first batch and over the run.

Reads ``leap bench --batch-size B`` records (``records.jsonl`` in each DIR), decodes nothing. For each search method
(``leap-drafters``, ``leap-drafters-prior``), per kin: its drafting steps in batch 0 - their number, their speedup all in
(plain steps' seconds for their tokens a row, at the batch's recorded plain rate, over theirs: what
:meth:`leap.core.policies.loss_budget.DraftingTally.speedup` reads) with a 95% bootstrap interval over steps - then which
kin drafted the rest of the run, and the run's plain step (the host's speed). Usage:

    python experiments/2026-12-02-kin-noise/kin_first_batch.py docs/data/regret-amd-a4d3b97/b4-t1 ...
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np

KIN = ("lowbit", "cascade")


def first_batch(record: dict) -> dict[str, list[tuple[float, float]]]:
    """Each kin's drafting steps in ``record``'s batch as (seconds, plain seconds for their tokens a row)."""
    rates = {int(rows): rate for rows, rate in record["batch_plain_rate"].items() if rate}
    steps: dict[str, list[tuple[float, float]]] = {}
    for drafter, cap, rows, seconds, worth in zip(record["batch_drafters"], record["batch_caps"],
                                                  record["batch_step_rows"], record["batch_step_s"],
                                                  record["batch_step_worth"]):
        if cap and rows in rates and drafter in KIN:
            steps.setdefault(drafter, []).append((seconds, worth / rates[rows]))
    return steps


def interval(steps: list[tuple[float, float]]) -> tuple[float, float, float]:
    """The steps' speedup all in and its 95% bootstrap interval (2000 resamples of the steps, seed 0)."""
    rng = np.random.default_rng(0)
    data = np.array(steps)
    draws = rng.integers(0, len(data), (2000, len(data)))
    ratios = data[draws, 1].sum(axis=1) / data[draws, 0].sum(axis=1)
    return data[:, 1].sum() / data[:, 0].sum(), *np.quantile(ratios, [0.025, 0.975])


def main(dirs: list[str]) -> None:
    for folder in dirs:
        records = [json.loads(line) for line in Path(folder, "records.jsonl").read_text().splitlines()]
        answers = [r for r in records if r.get("kind") == "answer"]
        plain = [s for r in answers if r["method"] == "ar"
                 for s, rows in zip(r["batch_step_s"], r["batch_step_rows"]) if rows == r["batch_size"]]
        print(f"{folder}: plain step at full rows {1000 * statistics.median(plain):.1f} ms (median)")
        for method in ("leap-drafters", "leap-drafters-prior"):
            runs = [r for r in answers if r["method"] == method]
            if not runs:
                continue
            parts = []
            for kin, steps in sorted(first_batch(runs[0]).items()):
                point, low, high = interval(steps) if len(steps) > 1 else (float("nan"),) * 3
                parts.append(f"{kin} {len(steps)} steps {point:.2f} [{low:.2f}, {high:.2f}]")
            after = Counter(d for r in runs[1:] for d in r["batch_drafters"] if d in KIN)
            print(f"  {method}: batch 0 {'; '.join(parts) or 'no kin step'}; batches after: {dict(after)}")


if __name__ == "__main__":
    main(sys.argv[1:])
