"""What the search's steps cost against a fixed drafter's, paired by batch and cap: for every batch and cap both
methods drafted at with every row still decoding (``lowbit`` or plain steps only), the mean seconds of the second
method's steps over the first's and the mean tokens they committed likewise; per cap, the median over batches.

Reads the records only. Usage:
    python experiments/2026-12-02-cap16/steps_paired.py DIR [FIRST SECOND]   (default lowbit-auto leap-drafters-prior)
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def main(folder: str, first: str = "lowbit-auto", second: str = "leap-drafters-prior") -> None:
    records = [json.loads(line) for line in open(f"{folder}/records.jsonl")]
    rows = records[0]["settings"]["batch_size"]
    steps: dict[tuple[str, int], dict[str, list[tuple[float, int]]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("method") not in (first, second):
            continue
        drafters = r.get("batch_drafters") or ["lowbit"] * len(r["batch_caps"])
        for cap, n, got, s, d in zip(r["batch_caps"], r["batch_step_rows"], r["batch_step_committed"], r["batch_step_s"],
                                     drafters):
            if n == rows and d in ("lowbit", "plain"):
                steps[r["question_id"], cap][r["method"]].append((s, got))
    seconds, tokens = defaultdict(list), defaultdict(list)
    for (_, cap), by in steps.items():
        if first in by and second in by:
            mean = {m: (statistics.mean(s for s, _ in v), statistics.mean(g for _, g in v)) for m, v in by.items()}
            seconds[cap].append(mean[second][0] / mean[first][0])
            tokens[cap].append(mean[second][1] / mean[first][1])
    for cap in sorted(seconds):
        print(f"{folder} cap {cap}: {len(seconds[cap])} batches, {second}'s step seconds over {first}'s median "
              f"{statistics.median(seconds[cap]):.2f}, tokens {statistics.median(tokens[cap]):.2f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
