"""Replay a batch search's steps through its bandit: the plain arm's value and every arm's value over it, for the
bandit of B rows, at the start of each batch. Reads a step log of
``experiments/2026-11-28-batch-shared-runner/step_log.py`` (one JSON line a step) and feeds the search's steps (the
method whose rows hold ``--drafters`` drafters) to :class:`~leap.core.policies.batch_caps.GoodputBandit` as
:meth:`~leap.core.decoding.batch.BatchDecoder.generate` does: one bandit per number of rows (a new count seeded from
the closest), the step's seconds without beginning rows, a low-bit drafter's first step after a plain step or another
drafter's left unmeasured (``first_step_setup="switch"``), the tokens a row.

Usage: python experiments/2026-11-28-stale-bar/replay.py STEPS.jsonl [--rows 8] [--drafters 6] [--refresh 0|32]
(batch 0 is the untimed warm-up; ``--refresh`` the bandit's; the log's choices were made by the bandit of the commit
that ran it, so a replay shows the values that bandit held, not what another would have chosen)."""

import argparse
import json

from leap.core.policies.batch_caps import GoodputBandit, drafter_arms

parser = argparse.ArgumentParser()
parser.add_argument("steps")
parser.add_argument("--rows", type=int, default=8)
parser.add_argument("--drafters", type=int, default=6)
parser.add_argument("--refresh", type=int, default=0)
parser.add_argument("--keeps-context", default="4,5", help="drafter indices that keep a context (lowbit, cascade)")
args = parser.parse_args()
keeps = {int(d) for d in args.keeps_context.split(",")}
steps = [json.loads(line) for line in open(args.steps)]
batches, current = [], []
for s in steps:  # a batch ends where the method changes or rows come back
    if current and (s["nd"] != current[-1]["nd"] or s["rows"] > current[-1]["rows"]):
        batches.append(current)
        current = []
    current.append(s)
batches.append(current)
bandits: dict[int, GoodputBandit] = {}
for number, batch in enumerate(b for b in batches if b[0]["nd"] == args.drafters):
    if number == 1:  # the warm-up batch's bandits are forgotten before the timed ones (BenchMethod.after_warm_up)
        bandits.clear()
    bandit = bandits.get(args.rows)
    if bandit is not None:
        means = bandit.means()
        plain = means.get((0, 0))
        print(f"timed batch {number} starts: plain {plain:.2f} tokens a row a second; over it:",
              {f"{d},{c}": round(v / plain, 2) for (d, c), v in means.items() if c}, "plain pulls",
              bandit.counts[0])
    previous, rows = None, args.rows  # the rows before each step: the last step's rows after it
    for s in batch:
        before, rows = rows, s["rows"]
        if before not in bandits:
            bandits[before] = (bandits[min(bandits, key=lambda n: (abs(n - before), n))].seeded(None) if bandits
                               else GoodputBandit(drafter_arms(args.drafters, (0, 2, 4, 8, 16)), refresh=args.refresh))
        d, cap = s["d"], s["cap"]
        setup = cap > 0 and d in keeps and (previous is None or (previous in keeps) != (d in keeps))
        previous = d if cap else None
        if not setup:
            bandits[before].update((d if cap else 0, cap), s["c"] / before, s["s"] - s["begin"])
