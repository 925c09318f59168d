"""How the batch search's cap of 16 fared in the recorded CPU batch cells: for every search run (a ``leap-drafters*``
method of a record with ``--batch-size`` B > 1) that drafted at cap 16 at full rows (B rows still decoding) for at
least 2% of that time, its share of the time and its goodput (tokens committed over step seconds, every drafter's
cap-16 steps pooled) over the run's best other arm's (a (drafter, cap) pair with at least 2% of the time).

Reads the records only, decodes nothing. Usage, from the repository root:
    python experiments/2026-12-02-cap16/cap16_share.py [RECORDS.jsonl ...]
(default: docs/data/regret*/b*-t*, docs/data/kin-noise*/b*, docs/data/caps*/b*).
"""

from __future__ import annotations

import glob
import json
import statistics
import sys
from collections import Counter

DEFAULT = ("docs/data/regret*/b*-t*/records.jsonl", "docs/data/kin-noise*/b*/records.jsonl",
           "docs/data/caps*/b*/records.jsonl")


def runs(path: str):
    """(method, cap-16 share of the full-row time, cap-16 goodput over the best other arm's) per search run."""
    records = [json.loads(line) for line in open(path)]
    rows = records[0].get("settings", {}).get("batch_size")
    if not rows or rows == 1:
        return
    for method in sorted({r.get("method") for r in records if str(r.get("method", "")).startswith("leap-drafters")}):
        seconds, tokens = Counter(), Counter()
        for r in records:
            if r.get("method") != method or "batch_step_rows" not in r:
                continue
            drafters = r.get("batch_drafters") or ["?"] * len(r["batch_caps"])
            for cap, n, got, s, d in zip(r["batch_caps"], r["batch_step_rows"], r["batch_step_committed"],
                                         r["batch_step_s"], drafters):
                if n == rows:
                    seconds[d, cap] += s
                    tokens[d, cap] += got
        total = sum(seconds.values())
        at16 = [arm for arm in seconds if arm[1] == 16]
        share = sum(seconds[a] for a in at16) / total if total else 0.0
        others = [tokens[a] / seconds[a] for a in seconds if a[1] != 16 and seconds[a] > 0.02 * total]
        if share < 0.02 or not others:
            continue
        goodput = sum(tokens[a] for a in at16) / sum(seconds[a] for a in at16)
        yield method, share, goodput / max(others)


def main(paths: list[str]) -> None:
    found = [(path, *run) for path in paths for run in runs(path)]
    for path, method, share, ratio in found:
        print(f"{path:60s} {method:26s} cap-16 share {share:.2f}, its goodput / best other arm's {ratio:.2f}")
    ratios, shares = [f[3] for f in found], [f[2] for f in found]
    print(f"{len(found)} runs drafted at cap 16 at full rows; its goodput over the best other arm's: median "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}), below it in "
          f"{sum(r < 1 for r in ratios)}; its share of the time: median {statistics.median(shares):.2f} "
          f"({min(shares):.2f}-{max(shares):.2f})")


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(p for pattern in DEFAULT for p in glob.glob(pattern)))
