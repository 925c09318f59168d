"""Which drafters a batch search drafted with after its first batch, per recorded run: the drafting steps of batches
1 onwards, by drafter (the three most used). After batch 0 the search's successive elimination keeps the drafter whose
best arm's goodput, by the bandit's point estimates, is highest (``BatchSearch``'s ``prune``); at B = 8, where no
drafter pays by more than the noise, which one that is changes from run to run.

Reads the records only. Usage: python experiments/2026-12-02-cap16/kept_after_first.py docs/data/regret-*/b8-t0 ...
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def main(folders: list[str]) -> None:
    for folder in folders:
        records = [json.loads(line) for line in open(f"{folder}/records.jsonl")]
        for method in ("leap-drafters", "leap-drafters-prior"):
            later = Counter()
            for r in records:
                if r.get("method") == method and r.get("question_id") != "b0" and "batch_drafters" in r:
                    later.update(d for d, cap in zip(r["batch_drafters"], r["batch_caps"]) if cap)
            if any(r.get("method") == method for r in records):
                kept = ", ".join(f"{d} {n}" for d, n in later.most_common(3)) or "none (plain decoding)"
                print(f"{folder:40s} {method:20s} {kept}")


if __name__ == "__main__":
    main(sys.argv[1:])
