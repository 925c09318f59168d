"""Where the drafter search at batch level spends its steps (issue 37): the batchable options of leap-drafters held by
every row and the goodput bandit over (drafter, cap) arms, caps 0/2/4/8/16 (leap-drafters' default), on leap's own seed prompts 300+ (never
Spec-Bench), B rows a batch, three batches, 128 new tokens, T = 0. Prints each batch's time and, per arm, its steps,
tokens, seconds and goodput, then the first 60 steps as (arm, cap, rows, tokens, seconds).
Usage: python experiments/2026-11-26-batch-search-steps/batch_search_steps.py [B]"""

from __future__ import annotations

import collections
import sys
import time

from leap.core import load_model
from leap.core.decoding import batch_session
from leap.core.decoding.batch import BatchDecoder
from leap.heads.prompts import seed_prompts
from leap.search.drafter_space import DEFAULT_DRAFTERS, batch_options


def main() -> None:
    b = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    model = load_model()
    options = batch_options(DEFAULT_DRAFTERS, model)
    labels = [o.label for o in options]
    decoder = BatchDecoder(model, [(o.name, o.kwargs) for o in options], num_tokens="auto", caps=(0, 2, 4, 8, 16))
    prompts = [model.encode(p, chat=True) for p in seed_prompts(400)[300:300 + 3 * b]]
    step, log = batch_session.BatchSession.step, []

    def logged(self, cap, drafter=0):
        rows = len(self.active)
        committed, seconds = step(self, cap, drafter)
        log.append((labels[drafter] if cap else "plain", cap, rows, committed, round(seconds, 3)))
        return committed, seconds

    batch_session.BatchSession.step = logged
    for i in range(3):
        t0 = time.perf_counter()
        out = decoder.generate(prompts[i * b:(i + 1) * b], max_new_tokens=128)
        print(f"batch {i}: {time.perf_counter() - t0:.2f} s, {out.steps} steps, {out.new_tokens} tokens")
    arms = collections.defaultdict(lambda: [0, 0, 0.0])
    for label, cap, _, committed, seconds in log:
        arm = arms[(label, cap)]
        arm[0], arm[1], arm[2] = arm[0] + 1, arm[1] + committed, arm[2] + seconds
    for (label, cap), (n, tokens, seconds) in sorted(arms.items(), key=lambda kv: -kv[1][0]):
        print(f"{label} cap {cap}: {n} steps, {tokens} tokens in {seconds:.2f} s, {tokens / seconds:.1f} tokens/s")
    print("first steps (arm, cap, rows, tokens, seconds):", log[:60])


if __name__ == "__main__":
    main()
