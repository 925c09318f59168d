"""Every step of every batch a `leap bench --batch-size B` run decodes, one JSON line each: the drafter (index in the
method's list; a single-drafter method's is 0), the chain cap, the step's seconds, the seconds spent beginning rows
(``begin``) and drafting (``draft``), and the tokens it committed over every row (``c``). ``nd`` tells the methods
apart: the number of drafters the method's rows hold (the search's: 6).

Usage (from the repository root, leap installed):
    python experiments/2026-11-28-batch-shared-runner/step_log.py STEPS.jsonl bench --batch-size 8 \
        --methods ar,lowbit-auto=lowbit,leap-drafters --method-arg lowbit-auto:batch_cap=auto \
        --categories writing,roleplay --num-prompts 4 --temperature 0 --device cpu --threads 2 \
        --max-new-tokens 128 --seed 0 --quiet --first-turn-only --out OUT
The warm-up batch (16 tokens) is logged too, before the timed one."""

import json
import sys
import time

from leap.cli import main
from leap.core.decoding import batch_session

log = open(sys.argv[1], "w")
step = batch_session.BatchSession.step


def logged(self, cap, drafter=0):
    t = time.perf_counter()
    committed, seconds = step(self, cap, drafter)
    log.write(json.dumps({"rows": len(self.active), "d": drafter, "cap": cap, "s": round(seconds, 4),
                         "wall": round(time.perf_counter() - t, 4), "begin": round(self.begin_s, 4),
                         "draft": round(self.draft_s, 4), "c": committed, "nd": len(self.decoder.specs)}) + "\n")
    log.flush()
    return committed, seconds


batch_session.BatchSession.step = logged
sys.argv = ["leap"] + sys.argv[2:]
main()
