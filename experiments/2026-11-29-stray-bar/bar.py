"""The batch search's bar against plain decoding's actual step, batch by batch, from a `leap bench --batch-size B` run.

For every method with a cap bandit and every batch: the seconds a plain step took by the bandit's plain rate at B rows
after the batch (`batch_plain_rate`: tokens a row a second), over `ar`'s mean step at B rows in the same batch
(`batch_step_s`). Above 1: the bar is slower than plain decoding was, and a drafting arm is valued that much too high.

Then the strays: per method, its plain steps (every step of `ar`, the cap-0 steps of the others) at row counts with five
or more of them in a batch, and how many took over twice that batch's median at that row count.

Usage: python experiments/2026-11-29-stray-bar/bar.py RUN_DIR/records.jsonl...
"""

import collections
import json
import statistics
import sys


def main(paths: list[str]) -> None:
    for path in paths:
        records = [json.loads(line) for line in open(path)]
        by_batch: dict[str, dict[str, dict]] = collections.defaultdict(dict)
        for r in records:
            if r.get("kind") == "answer":
                by_batch[r["question_id"]][r["method"]] = r
        batches = sorted(by_batch, key=lambda q: int(q[1:]))
        methods = sorted({m for q in batches for m in by_batch[q]} - {"ar"})
        print(path)
        for method in methods:
            cells = []
            for q in batches:
                r, ar = by_batch[q].get(method), by_batch[q].get("ar")
                rate = (r or {}).get("batch_plain_rate", {}).get(str((r or {}).get("batch_size")))
                ar_steps = [s for n, s in zip(ar["batch_step_rows"], ar["batch_step_s"]) if r and n == r["batch_size"]]
                cells.append(f"{1 / rate / statistics.mean(ar_steps):.2f}" if rate and ar_steps else "  - ")
            print(f"  {method:28}", " ".join(cells))
        strays(records)


def strays(records: list[dict]) -> None:
    total, over = collections.Counter(), collections.Counter()
    for r in records:
        if r.get("kind") != "answer":
            continue
        steps = collections.defaultdict(list)
        for n, s, cap in zip(r["batch_step_rows"], r["batch_step_s"], r["batch_caps"]):
            if cap == 0 or r["method"] == "ar":
                steps[n].append(s)
        for seconds in steps.values():
            if len(seconds) >= 5:
                median = statistics.median(seconds)
                total[r["method"]] += len(seconds)
                over[r["method"]] += sum(s > 2 * median for s in seconds)
    for method in sorted(total):
        print(f"  strays {method:21} {over[method]} of {total[method]} plain steps over twice the median")


if __name__ == "__main__":
    main(sys.argv[1:])
