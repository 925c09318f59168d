"""What making a low-bit runner costs, with and without reusing a dropped runner's llama.cpp context
(leap.core.modeling.llama_cpp.contexts): the default model's GGUF at its own n_ctx, median of N runners made and
dropped one after another, each then taking in the same 40 tokens (so a reused context is shown to work).
Usage: python experiments/2026-11-26-lowbit-contexts/lowbit_contexts.py [--repeats N] [--out FILE.json]"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time

from leap.core import load_model
from leap.core.modeling.low_bit import LlamaCppRunner, gguf_of
from leap.core.runtime.provenance import provenance


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--out")
    args = ap.parse_args()
    model = load_model()
    path, n_ctx = gguf_of(model), int(model.max_context)
    LlamaCppRunner(path, n_ctx=n_ctx).sync(list(range(100, 140)))  # the weights loaded once per process
    gc.collect()
    record = {"gguf": path.name, "n_ctx": n_ctx, "repeats": args.repeats, "provenance": provenance(model)}
    for reuse in ("0", "1"):
        os.environ["LEAP_LOWBIT_REUSE"] = reuse
        made, synced = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            runner = LlamaCppRunner(path, n_ctx=n_ctx)
            t1 = time.perf_counter()
            runner.sync(list(range(100, 140)))
            synced.append(time.perf_counter() - t1)
            made.append(t1 - t0)
            del runner
            gc.collect()
        key = "reuse" if reuse == "1" else "new"
        record[key] = {"make_s": statistics.median(made), "sync40_s": statistics.median(synced)}
        print(f"{key}: a runner made in {1000 * record[key]['make_s']:.1f} ms (median of {args.repeats}), "
              f"40 tokens taken in {1000 * record[key]['sync40_s']:.1f} ms")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
