"""Issue 35 (a draft token's cost): the low-bit draft's token time alone and between the target's verifications.

``leap generate ... --drafter lowbit --profile`` reports a draft token's cost inside decoding; llama.cpp's own
one-token pass is cheaper. This measures why, on leap's seed prompts (never Spec-Bench): the draft (the shipped GGUF,
llama.cpp, 2 threads) takes a prompt in, then drafts greedily one token at a time (``feed`` + argmax: what ``lowbit``'s
chain does per token), timed per token - once alone, and once with a forward of the float32 target over ``--width``
tokens (a verification) after every ``--chain`` draft tokens, as in a speculative step. Rounds alternate. Per-token
medians, and the median by position after a verification (0 = the first draft token after it). The CPU's last-level
cache size is recorded (sysfs): a target whose weights (~540 MB) stream through it evicts the draft's (~100 MB).
Writes one JSON object to ``--out``.

    python experiments/2026-11-26-draft-eviction/draft_eviction.py --out docs/data/draft_eviction.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from leap.core import load_model
from leap.core.modeling.layers import LayerStack
from leap.core.modeling.low_bit import LlamaCppRunner, gguf_of
from leap.core.runtime.provenance import provenance
from leap.heads.prompts import seed_prompts


def last_level_cache() -> str | None:
    caches = sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"))
    return (caches[-1] / "size").read_text().strip() if caches else None


def draft(runner, stack, ids, tokens: int, chain: int, width: int, verify: bool) -> list[tuple[int, float]]:
    """(position after the last verification, seconds) for each of ``tokens`` draft tokens."""
    runner.truncate(0)
    token = int(runner.feed(ids).argmax())
    out = []
    with torch.inference_mode():
        cache = stack.new_cache()
        stack.run_layers(stack.embed(ids), stack.full_plan, cache, 0)
        for i in range(tokens):
            start = time.perf_counter()
            token = int(runner.feed([token]).argmax())
            out.append((i % chain, time.perf_counter() - start))
            if verify and i % chain == chain - 1:
                stack.logits(stack.run_layers(stack.embed([token] * width), stack.full_plan, cache, len(ids)))
                stack.rollback(cache, len(ids))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--chain", type=int, default=8)
    parser.add_argument("--width", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    meta = provenance()
    torch.set_num_threads(args.threads)
    model = load_model("smollm2")
    stack = LayerStack(model)
    runner = LlamaCppRunner(gguf_of(model), threads=args.threads)
    prompts = [model.encode(p, chat=True) for p in seed_prompts(args.prompts)]
    times: dict[str, list[tuple[int, float]]] = {"alone": [], "between verifications": []}
    draft(runner, stack, prompts[0], 8, args.chain, args.width, True)  # warm
    for r in range(args.rounds):
        for ids in prompts:
            for way in (list(times) if r % 2 == 0 else list(reversed(times))):
                times[way] += draft(runner, stack, ids, args.tokens, args.chain, args.width,
                                    way == "between verifications")
    result = {"provenance": meta, "last_level_cache": last_level_cache(), "gguf": Path(runner.path).name,
              "prompts": len(prompts), "tokens": args.tokens, "chain": args.chain, "width": args.width,
              "rounds": args.rounds,
              "ms_per_draft_token": {w: 1000 * statistics.median(s for _, s in t) for w, t in times.items()},
              "ms_by_position": {w: [round(1000 * statistics.median(s for p, s in t if p == i), 2)
                                     for i in range(args.chain)] for w, t in times.items()}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    ms = result["ms_per_draft_token"]
    print(f"a draft token (median, ms): alone {ms['alone']:.2f}, between verifications "
          f"{ms['between verifications']:.2f}; last-level cache {result['last_level_cache']}")
    for way, row in result["ms_by_position"].items():
        print(f"{way}, by position after a verification: {row}")


if __name__ == "__main__":
    main()
