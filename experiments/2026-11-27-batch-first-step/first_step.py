"""What a drafter's first drafting step in a batch costs against its next one, on leap's seed prompts 320-323 (never
Spec-Bench): one batch of 4 rows holding every batchable drafter of ``leap-drafters``, a plain step, then for each
drafter in turn two steps at cap 4; per drafter the first step's wall time, the part of it spent beginning the rows
(``BatchSession.begin_s``), and the second step's. Run twice (``--repeats``): the second batch has the same prompts.
Usage: python experiments/2026-11-27-batch-first-step/first_step.py [--repeats 2] [--out FILE.json]"""

from __future__ import annotations

import argparse
import json

from leap.core import load_model
from leap.core.decoding.batch import BatchDecoder
from leap.core.runtime.provenance import provenance
from leap.heads.prompts import seed_prompts
from leap.search.drafter_space import DEFAULT_DRAFTERS, batch_options


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    model = load_model()
    options = batch_options(DEFAULT_DRAFTERS, model)
    prompts = [model.encode(p, chat=True) for p in seed_prompts(400)[320:324]]
    decoder = BatchDecoder(model, [(o.name, o.kwargs) for o in options], num_tokens="auto", caps=(0, 2, 4, 8))
    decoder.generate(prompts[:2], max_new_tokens=8)  # warm-up
    record = {"prompts": "seed_prompts 320-323", "provenance": provenance(model), "steps": []}
    for repeat in range(args.repeats):
        session = decoder.start(prompts, max_new_tokens=64)
        session.step(0, 0)
        for i, option in enumerate(options):
            _, first = session.step(4, i)
            begin = session.begin_s
            _, second = session.step(4, i)
            record["steps"].append({"repeat": repeat, "drafter": option.label, "first_s": first, "begin_s": begin,
                                    "first_without_begin_s": first - begin, "second_s": second})
            print(f"{repeat} {option.label}: first step {first:.3f} s (begin {begin:.3f} s), second {second:.3f} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
