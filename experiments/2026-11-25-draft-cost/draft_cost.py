"""Issue 35: what a low-bit draft token costs, by the draft's format, against a plain step and the bandwidth floor.

For each format (``lowbit``'s ``quant``: llama.cpp re-encodings of the shipped GGUF) and each of leap's seed prompts
(:func:`leap.heads.prompts.seed_prompts`, Apache-2.0, numbers 1400 on: never Spec-Bench), greedy, ``--tokens`` new
tokens: plain decoding and ``lowbit`` with that format, interleaved per prompt, each call timed whole
(:func:`leap.core.runtime.device.wall_clock`) and profiled (:func:`leap.core.decoding.profile.time_profile`).
Per format: a draft token's time (draft phase over draft tokens) in ms and in plain steps (issue 35's target:
<= 0.12), the draft's acceptance and M, and the speedup (plain seconds over lowbit seconds, pooled). The floor:
the format's GGUF bytes over this machine's memory bandwidth, measured here (median of five copies of a 512 MiB
tensor, read + write) - a draft token must read every weight once, so no kernel does it faster. Every generation
is checked token-identical to plain decoding. Writes one JSON object to ``--out``.

    python experiments/2026-11-25-draft-cost/draft_cost.py --out docs/data/draft_cost.json [--quants q8_0,native,NAME=PATH.gguf]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from leap.core import load_model
from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.decoding.profile import time_profile
from leap.core.drafters import make_drafter
from leap.core.modeling.low_bit import gguf_of, requantized
from leap.core.runtime.device import wall_clock
from leap.core.runtime.provenance import provenance
from leap.heads.prompts import seed_prompts


def bandwidth_gb_s(mib: int = 512) -> float:
    """Memory bandwidth as one tensor copy counts it (bytes read + bytes written per second), median of five."""
    src = torch.ones(mib * 2 ** 20 // 4)
    dst = torch.empty_like(src)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - start)
    return 2 * src.numel() * 4 / statistics.median(times) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--quants", default="q8_0,q4_k_m,iq4_nl,q4_0,native")
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    meta = provenance()  # at the start: the code measured, whatever is edited while it runs
    torch.set_num_threads(args.threads)
    model = load_model("smollm2")
    # a format name (lowbit's quant), or NAME=PATH: a GGUF file of your own drafted as it is (quant=native)
    files = dict(q.split("=", 1) for q in args.quants.split(",") if "=" in q)
    quants = [q.split("=", 1)[0] for q in args.quants.split(",")]
    plain = SelfSpecDecoder(model, None)
    spec = {q: SelfSpecDecoder(model, None, drafter=make_drafter("lowbit", gguf=files[q], quant="native") if q in files
                               else make_drafter("lowbit", quant=q)) for q in quants}
    texts = seed_prompts(1400 + args.prompts)[1400:]
    settings = dict(max_new_tokens=args.tokens, chat=True)
    for d in (plain, *spec.values()):  # warm-up: re-encodings written, runners built, first-use checks run
        d.generate(texts[0], max_new_tokens=8, chat=True)
    plain_seconds, plain_tokens = 0.0, 0
    rows = {q: {"seconds": 0.0, "plain_seconds": 0.0, "draft_s": 0.0, "draft_tokens": 0, "accepted": 0, "steps": 0,
                "tokens": 0, "identical": 0} for q in quants}
    for text in texts:
        start = wall_clock(model.device)
        reference = plain.generate(text, **settings)
        plain_s = wall_clock(model.device) - start
        plain_seconds, plain_tokens = plain_seconds + plain_s, plain_tokens + reference.new_tokens
        for q in quants:
            start = wall_clock(model.device)
            out = spec[q].generate(text, **settings)
            seconds = wall_clock(model.device) - start
            profile = time_profile(out, plain_s / reference.new_tokens, call_s=seconds)
            row = rows[q]
            row["seconds"] += seconds
            row["plain_seconds"] += plain_s
            row["draft_s"] += profile["draft_s"]
            row["draft_tokens"] += profile["draft_tokens"]
            row["accepted"] += sum(s.accepted for s in out.steps)
            row["steps"] += len(out.steps)
            row["tokens"] += out.new_tokens
            row["identical"] += int(list(out.token_ids) == list(reference.token_ids))
    bandwidth = bandwidth_gb_s()
    plain_step_ms = 1e3 * plain_seconds / plain_tokens  # a plain token, prefill included, as the profile counts
    result = {"meta": meta, "prompts": args.prompts, "tokens": args.tokens,
              "bandwidth_gb_s": round(bandwidth, 2), "plain_step_ms": round(plain_step_ms, 2), "formats": {}}
    base = gguf_of(model)
    for q in quants:
        r = rows[q]
        size = (Path(files[q]) if q in files else requantized(base, q)).stat().st_size
        per_token = 1e3 * r["draft_s"] / max(r["draft_tokens"], 1)
        floor = 1e3 * size / (bandwidth * 1e9 / 2)  # a draft token reads every weight once (half a copy's traffic)
        result["formats"][q] = {
            "gguf_mb": round(size / 1e6, 1), "draft_token_ms": round(per_token, 2),
            "draft_token_plain_steps": round(per_token / plain_step_ms, 3), "floor_ms": round(floor, 2),
            "acceptance": round(r["accepted"] / max(r["draft_tokens"], 1), 3),
            "M": round(r["tokens"] / max(r["steps"], 1), 2),
            "speedup": round(r["plain_seconds"] / r["seconds"], 3), "identical": f"{r['identical']}/{len(texts)}"}
        f = result["formats"][q]
        print(f"{q:>7}: {f['gguf_mb']:6.1f} MB, draft token {f['draft_token_ms']:.2f} ms = "
              f"{f['draft_token_plain_steps']:.3f} plain steps (floor {f['floor_ms']:.2f} ms), acceptance "
              f"{f['acceptance']:.0%}, M {f['M']:.2f}, speedup {f['speedup']:.2f}x, identical {f['identical']}")
    print(f"plain step {plain_step_ms:.1f} ms; bandwidth {bandwidth:.1f} GB/s (copy: read + write)")
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
