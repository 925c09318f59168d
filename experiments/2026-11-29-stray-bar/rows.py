"""Per batch and drafter, what its drafting steps were worth against plain decoding's actual step: by their tokens a row
(the bandit's default reward) and by the worst row's tokens a step (a batch without refills ends with its last row).

A batch record's `accept_lengths` holds every row's tokens a step, row after row (each row from the first step until it
finished); `batch_step_s` the steps' seconds, `batch_drafters` and `batch_caps` their drafter and cap. A step's cost is
its seconds over `ar`'s median step at its row count in the same batch. "mean": the drafter's tokens a row over its
steps' summed cost; "worst row": the least tokens a step of any row it drafted at least half its steps (and three), over
the same cost. Above 1: its steps paid; the batch's own ratio to `ar` is the first column.

Usage: python experiments/2026-11-29-stray-bar/rows.py RUN_DIR/records.jsonl...
"""

import collections
import json
import statistics
import sys


def per_step(record: dict) -> list[dict[int, int]]:
    """Each step's tokens per row still decoding (request index -> tokens), from the rows' `accept_lengths`."""
    flat, i, rows = record["accept_lengths"], 0, []
    for need in record["row_new_tokens"]:
        got, mine = 0, []
        while got < need:
            mine.append(flat[i])
            got, i = got + flat[i], i + 1
        rows.append(mine)
    return [{i: row[t] for i, row in enumerate(rows) if t < len(row)} for t in range(len(record["batch_step_rows"]))]


def main(paths: list[str]) -> None:
    for path in paths:
        by_batch: dict[str, dict[str, dict]] = collections.defaultdict(dict)
        for r in (json.loads(line) for line in open(path)):
            if r.get("kind") == "answer":
                by_batch[r["question_id"]][r["method"]] = r
        print(path)
        for q in sorted(by_batch, key=lambda q: int(q[1:])):
            ar = by_batch[q]["ar"]
            plain = collections.defaultdict(list)
            for n, s in zip(ar["batch_step_rows"], ar["batch_step_s"]):
                plain[n].append(s)
            for method, r in sorted(by_batch[q].items()):
                if method == "ar" or "batch_drafters" not in r:
                    continue
                worth = collections.defaultdict(lambda: [0.0, 0.0, 0, collections.Counter(), collections.Counter()])
                steps_of = zip(per_step(r), r["batch_step_s"], r["batch_drafters"], r["batch_caps"],
                               r["batch_step_rows"])
                for tokens, s, drafter, cap, n in steps_of:
                    if cap and plain.get(n):
                        w = worth[drafter]
                        w[0] += sum(tokens.values()) / n
                        w[1] += s / statistics.median(plain[n])
                        w[2] += 1
                        for row, k in tokens.items():
                            w[3][row] += k
                            w[4][row] += 1
                cells = []
                for drafter, (tokens, cost, steps, row_tokens, row_steps) in worth.items():
                    rates = [row_tokens[x] / row_steps[x] for x in row_steps if row_steps[x] >= max(3, steps // 2)]
                    worst = f"{min(rates) * steps / cost:.2f}" if rates else "-"
                    cells.append(f"{drafter}:{steps} mean {tokens / cost:.2f} worst row {worst}")
                print(f"  {q} {method:28} {ar['wall_time_s'] / r['wall_time_s']:.2f}", " ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
