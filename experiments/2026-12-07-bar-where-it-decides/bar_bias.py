"""Where a batch method's bar (the bandit's plain goodput per row count, recorded after each batch as
``batch_plain_rate``) parts from ``ar``'s steps in the same batch, from the records alone.

Four readings, each over every run folder given (batch records with ``ar`` beside the method):

- ``--rows``: the bar's seconds a plain step over ``ar``'s mean step in the same batch, scaled to the row count by the
  shape of ``docs/data/batch_costs.json`` (as ``experiments/2026-12-03-batch-bar/tallies.py`` scales), per row count.
- ``--split``: the all-in tally of the drafting steps (their worth at the bar) against the same steps at ``ar``'s
  steps, the steps at the batch's full rows apart from those at fewer rows (a batch's tail, once rows finish).
- ``--runs``: each plain step the method took at full rows against ``ar``'s step at the same position (tokens a row
  committed before it), by where it lies: a batch's start, a tail after the last drafting step, or a run of n plain
  steps between drafting steps (position in the run).
- ``--width``: each drafting step's verification seconds (``batch_step_s`` less ``batch_step_draft_s``) scaled to a
  plain step by the calibration's cost of its width (``batch_step_width``) - a bar that would cost no plain step -
  against ``ar``'s step at the same position; CALIBRATION is the calibration file the run used
  (``$LEAP_CACHE/calibration/<model>-cpu-float32-*.json``).

Usage: python experiments/2026-12-07-bar-where-it-decides/bar_bias.py --rows|--split|--runs DIR...
       python experiments/2026-12-07-bar-where-it-decides/bar_bias.py --width CALIBRATION DIR...
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "2026-12-03-batch-bar"))
from tallies import plain_cost  # noqa: E402  (the same scaling over rows as the batch-bar experiment's)


def batches(folders):
    """(method, its batch record, ar's record of the same batch) for every batch method's batch that drafted."""
    for folder in folders:
        answers = [json.loads(line) for line in open(Path(folder) / "records.jsonl")]
        answers = [r for r in answers if r.get("kind") == "answer"]
        ar = {r["question_id"]: r for r in answers if r["method"] == "ar"}
        for r in answers:
            plain = ar.get(r["question_id"])
            if (r["method"] != "ar" and "batch_plain_rate" in r and any(r["batch_caps"]) and plain
                    and plain.get("batch_step_s")):
                yield r["method"], r, plain


def positions(r):
    """Each step's position: tokens a row committed before it."""
    out, at = [], 0.0
    for committed, rows in zip(r["batch_step_committed"], r["batch_step_rows"]):
        out.append(int(at))
        at += committed / rows
    return out


def geo(values):
    return math.exp(statistics.mean(values)) if values else float("nan")


def by_rows(folders, cost):
    seen: dict[int, list[float]] = {}
    for _, r, plain in batches(folders):
        step = plain["decode_s"] / plain["steps"]
        for rows, rate in r["batch_plain_rate"].items():
            if rate:
                seen.setdefault(int(rows), []).append(math.log(1 / rate / (step * cost(int(rows)) / cost(r["batch_size"]))))
    for rows in sorted(seen):
        print(f"{rows} rows: bar over ar's step {geo(seen[rows]):.3f} (geometric mean over {len(seen[rows])} batches, "
              f"sd(log) {statistics.stdev(seen[rows]) if len(seen[rows]) > 1 else float('nan'):.3f})")


def split(folders, cost):
    sums: dict[tuple[str, str], list[float]] = {}
    for method, r, plain in batches(folders):
        step, full = plain["decode_s"] / plain["steps"], r["batch_size"]
        rates = {int(k): v for k, v in r["batch_plain_rate"].items()}
        worth = r.get("batch_step_worth") or [c / n for c, n in zip(r["batch_step_committed"], r["batch_step_rows"])]
        for cap, rows, seconds, w in zip(r["batch_caps"], r["batch_step_rows"], r["batch_step_s"], worth):
            if cap and rates.get(rows):
                s = sums.setdefault((method, "full rows" if rows == full else "fewer rows"), [0.0, 0.0, 0.0])
                s[0] += seconds
                s[1] += w / rates[rows]
                s[2] += w * step * cost(rows) / cost(full)
    for (method, where), (seconds, by_bar, by_ar) in sorted(sums.items()):
        print(f"{method} at {where}: {seconds:.1f} s drafting; tally by its bar {by_bar / seconds:.2f}, "
              f"by ar's steps {by_ar / seconds:.2f}")


def runs(folders):
    seen: dict[str, list[float]] = {}
    for _, r, plain in batches(folders):
        caps, ar_steps, full, at = r["batch_caps"], plain["batch_step_s"], r["batch_size"], positions(r)
        i, n = 0, len(caps)
        while i < n:
            if caps[i]:
                i += 1
                continue
            j = i
            while j < n and not caps[j]:
                j += 1
            for t in range(i, j):
                where = "start" if i == 0 else "tail" if j == n else f"run of {min(j - i, 4)}, step {min(t - i, 3) + 1}"
                if r["batch_step_rows"][t] == full and at[t] < len(ar_steps):
                    seen.setdefault(where, []).append(math.log(r["batch_step_s"][t] / ar_steps[at[t]]))
            i = j
    for where in sorted(seen):
        print(f"{where}: plain step over ar's at its position {geo(seen[where]):.3f} ({len(seen[where])} steps)")


def width(calibration, folders):
    curves = json.loads(Path(calibration).read_text())

    def curve(rows):
        points = sorted((int(q), c) for q, c in (curves["batch_curves"].get(str(rows)) or curves["verify_curve"]).items())

        def at(q):
            for (q0, c0), (q1, c1) in zip(points, points[1:]):
                if q <= q1:
                    return c0 + (c1 - c0) * (q - q0) / (q1 - q0)
            return points[-1][1]
        return at
    seen: dict[int, list[float]] = {}
    for _, r, plain in batches(folders):
        if "batch_step_width" not in r:
            continue
        full, ar_steps, cost = r["batch_size"], plain["batch_step_s"], curve(r["batch_size"])
        for cap, rows, s, d, w, t in zip(r["batch_caps"], r["batch_step_rows"], r["batch_step_s"],
                                         r["batch_step_draft_s"], r["batch_step_width"], positions(r)):
            if cap and rows == full and t < len(ar_steps):
                seen.setdefault(w, []).append(math.log((s - d) * cost(1) / cost(w) / ar_steps[t]))
    for w in sorted(seen):
        print(f"width {w}: verification scaled to a plain step over ar's at its position {geo(seen[w]):.3f} "
              f"({len(seen[w])} steps)")


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "--width":
        width(rest[0], rest[1:])
    else:
        {"--rows": lambda: by_rows(rest, plain_cost()), "--split": lambda: split(rest, plain_cost()),
         "--runs": lambda: runs(rest)}[mode]()
