"""How much the same work costs from one method to the next within one batch: for every batch, cap and method, the
median seconds of its steps that did the same work - every row of the batch still decoding, every draft token
accepted (so B x (cap + 1) tokens committed), drafted by ``lowbit`` (or plain, at cap 0) - and, per batch and cap with
at least two methods, the slowest method's median over the fastest's.

Reads the records only. Usage: python experiments/2026-12-02-cap16/same_work.py docs/data/cap16-ee75a1c/b4-t0
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def main(folder: str) -> None:
    records = [json.loads(line) for line in open(f"{folder}/records.jsonl")]
    rows = records[0]["settings"]["batch_size"]
    steps: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("kind") != "answer" or "batch_step_rows" not in r:
            continue
        drafters = r.get("batch_drafters") or ["lowbit"] * len(r["batch_caps"])
        for cap, n, got, s, d in zip(r["batch_caps"], r["batch_step_rows"], r["batch_step_committed"], r["batch_step_s"],
                                     drafters):
            if n == rows and got == rows * (cap + 1) and d in ("lowbit", "plain"):
                steps[r["question_id"], cap][r["method"]].append(s)
    spreads = []
    for (batch, cap), by_method in sorted(steps.items(), key=lambda kv: (kv[0][1], int(kv[0][0][1:]))):
        medians = {m: statistics.median(v) for m, v in by_method.items() if m != "suffix-auto"}
        if len(medians) >= 2:
            spreads.append(max(medians.values()) / min(medians.values()))
            print(f"{batch} cap {cap}: " + ", ".join(f"{m} {1000 * v:.0f} ms" for m, v in medians.items())
                  + f"; slowest / fastest {spreads[-1]:.2f}")
    print(f"slowest / fastest over {len(spreads)} batch-caps: median {statistics.median(spreads):.2f}, "
          f"range {min(spreads):.2f}-{max(spreads):.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
