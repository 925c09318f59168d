"""Where a batch search's batches lose time to plain decoding, from a step log (`step_log.py` in
experiments/2026-11-28-batch-shared-runner): per batch of the search, its drafting steps' seconds beyond what its own
plain steps' goodput would have taken for the same tokens, split into the setup steps of the drafters that keep a
context (their first step after a step they did not draft: unmeasured by the bandit, outside the loss budget) and the
other drafting steps.

Usage: python experiments/2026-11-28-stale-bar/losses.py STEPS.jsonl CONTEXT_DRAFTERS
    CONTEXT_DRAFTERS: the drafter indices that keep a context, comma-separated (the search's lowbit and cascade: 4,5)
"""

import json
import sys

steps = [json.loads(line) for line in open(sys.argv[1])]
keeps = {int(x) for x in sys.argv[2].split(",")}
groups: list[list[dict]] = []
prev = None
for s in steps:  # a new batch: another method, or the search's rows growing back
    if prev is None or s["nd"] != prev["nd"] or (s["nd"] > 1 and s["rows"] > prev["rows"]):
        groups.append([])
    groups[-1].append(s)
    prev = s
for g in groups:
    wall, tokens = sum(s["wall"] for s in g), sum(s["c"] for s in g)
    if g[0]["nd"] <= 1:
        print(f"plain   {len(g):4d} steps {wall:6.2f} s {tokens:4d} tokens")
        continue
    plain = [s for s in g if s["cap"] == 0]
    rate = sum(s["c"] for s in plain) / max(sum(s["wall"] for s in plain), 1e-9)
    last, setup, drafting = None, [0, 0.0], [0, 0.0]
    for s in g:
        if s["cap"] == 0:
            last = None
            continue
        part = setup if s["d"] in keeps and (last is None or last not in keeps) else drafting
        part[0] += 1
        part[1] += s["wall"] - s["c"] / rate
        last = s["d"]
    print(f"search  {len(g):4d} steps {wall:6.2f} s {tokens:4d} tokens, plain steps {rate:5.1f} tokens/s; "
          f"setup steps {setup[0]} lose {setup[1]:.2f} s, other drafting steps {drafting[0]} lose {drafting[1]:.2f} s")
