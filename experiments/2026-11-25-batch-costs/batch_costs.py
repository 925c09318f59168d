"""What a batched forward costs: B rows x q new tokens each over a 300-token context, against one row and one
token (issue 37: where the verifier turns compute-bound), and what lowbit's batched draft costs: one llama.cpp pass
feeding a token to each of B rows. Medians of repeats.

Usage: python experiments/2026-11-25-batch-costs/batch_costs.py [--out docs/data/batch_costs.json] [--threads 2]
       python experiments/2026-11-25-batch-costs/batch_costs.py --preset llama3-8b --device cuda --dtype bfloat16 --sizes 1,2,4,8,16,32,64
           (a random model of that shape on the device: costs only; no llama.cpp draft pass)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from leap.core.decoding.batch import BatchState
from leap.core.modeling.layers import LayerStack
from leap.core.modeling.model import load_model
from leap.core.runtime.device import synchronize
from leap.core.runtime.provenance import provenance


def draft_costs(model, sizes, repeats: int) -> dict[int, float]:
    """One llama.cpp pass feeding a token to each of B rows sharing a context (lowbit's batched draft, Q8_0), ms."""
    from leap.core.modeling.low_bit import make_row_runners

    out = {}
    for b in sizes:
        runners = make_row_runners(model, max(b, 2), backend="llama.cpp", quant="q8_0")[:b]
        for r in runners:
            r.feed(list(range(100, 400)))
        times = []
        for rep in range(repeats * 2):
            t0 = time.perf_counter()
            type(runners[0]).feed_rows(runners, [[500 + rep] for _ in runners]) if b > 1 else runners[0].feed([500 + rep])
            times.append(time.perf_counter() - t0)
        out[b] = 1000 * statistics.median(times)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--context", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--preset", default=None, help="a leap smoke preset (random weights) instead of the default model")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--sizes", default="1,2,4,8")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.preset:
        from leap.bench.smoke import build_random_model

        model = build_random_model(args.preset, args.device, getattr(torch, args.dtype))
    else:
        model = load_model("smollm2")
    device = model.device
    stack = LayerStack(model)
    sizes, qs = tuple(int(b) for b in args.sizes.split(",")), (1, 2, 4, 8, 16)
    gen = torch.Generator().manual_seed(0)
    states = {}
    with torch.inference_mode():
        for b in sizes:
            state = BatchState(stack, b, args.context + 32)
            ids = torch.randint(min(100, model.vocab_size // 2), min(20000, model.vocab_size), (b, args.context), generator=gen).to(device)
            pos = torch.arange(args.context).repeat(b, 1).to(device)
            state.forward(ids, pos, torch.ones(b, args.context, dtype=torch.bool, device=device))
            states[b] = state
        times: dict[tuple[int, int], list[float]] = {(b, q): [] for b in sizes for q in qs}
        for _ in range(args.repeats):
            for b in sizes:
                for q in qs:
                    state = states[b]
                    start = state.slots
                    ids = torch.randint(min(100, model.vocab_size // 2), min(20000, model.vocab_size), (b, q), generator=gen).to(device)
                    pos = torch.arange(start, start + q).repeat(b, 1).to(device)
                    synchronize(device)
                    t0 = time.perf_counter()
                    hidden = state.forward(ids, pos, torch.ones(b, q, dtype=torch.bool, device=device))
                    model.lm_head(model.norm(hidden))
                    synchronize(device)
                    times[(b, q)].append(time.perf_counter() - t0)
                    state.keep(start, [0] * b)
    one = statistics.median(times[(1, 1)])
    draft = {} if args.preset else draft_costs(model, sizes, args.repeats)
    rows = [{"batch": b, "tokens_per_row": q, "ms": 1000 * statistics.median(times[(b, q)]),
             "cost_in_steps": statistics.median(times[(b, q)]) / one,
             "per_token_in_steps": statistics.median(times[(b, q)]) / one / (b * q)} for b in sizes for q in qs]
    print("| B \\ tokens per row | " + " | ".join(str(q) for q in qs) + " |")
    print("|---" * (len(qs) + 1) + "|")
    for b in sizes:
        print(f"| {b} | " + " | ".join(f"{r['cost_in_steps']:.2f}" for r in rows if r["batch"] == b) + " |")
    if draft:
        print("llama.cpp draft pass, one token for each of B rows (ms): " +
              ", ".join(f"B={b}: {ms:.1f}" for b, ms in draft.items()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"provenance": provenance(model), "context": args.context, "threads": args.threads,
                       "preset": args.preset, "device": str(device), "dtype": args.dtype,
                       "one_token_ms": 1000 * one, "rows": rows,
                       "lowbit_draft_pass_ms": {str(b): ms for b, ms in draft.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
