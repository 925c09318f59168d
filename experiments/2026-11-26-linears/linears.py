"""Issue 35 (the verifier's step): leap's oneDNN-packed float32 linears against torch's own, on the machine at hand.

Loads the default model twice, with packed linears (``fast_linear=True``) and with torch's own (``False``), and on
leap's seed prompts (:func:`leap.heads.prompts.seed_prompts`, never Spec-Bench) decodes each prompt plainly with both,
interleaved, each call timed whole: ms per generated token (prefill included), pooled over prompts, and whether the
outputs are token-identical. Then each model's calibrated costs (:func:`leap.core.decoding.calibrate.calibrate`, not
cached): a plain step's ms and a forward over ``k`` tokens (a verification of ``k - 1`` drafts) in ms. What
``load_model``'s default (``fast_linear=None``) chose on this machine is printed too
(:func:`leap.core.modeling.fast_linear.choose_linears`). Writes one JSON object to ``--out``.

    python experiments/2026-11-26-linears/linears.py --out docs/data/linears_xeon.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from leap.core import load_model
from leap.core.decoding.calibrate import calibrate
from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.runtime.device import wall_clock
from leap.core.runtime.provenance import provenance
from leap.heads.prompts import seed_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    meta = provenance()
    torch.set_num_threads(args.threads)
    models = {"packed": load_model("smollm2", fast_linear=True), "stock": load_model("smollm2", fast_linear=False)}
    chosen = load_model("smollm2")
    decoders = {way: SelfSpecDecoder(m, None) for way, m in models.items()}
    prompts = [models["stock"].encode(p, chat=True) for p in seed_prompts(args.prompts)]
    seconds = {way: 0.0 for way in models}
    tokens = {way: 0 for way in models}
    identical = 0
    for way, d in decoders.items():
        d.generate(prompts[0], max_new_tokens=8)  # warm
    for ids in prompts:
        outs = {}
        for way, d in decoders.items():
            start = wall_clock(models[way].device)
            out = d.generate(ids, max_new_tokens=args.tokens)
            seconds[way] += wall_clock(models[way].device) - start
            tokens[way] += len(out.token_ids)
            outs[way] = out.token_ids
        identical += outs["packed"] == outs["stock"]
    result = {"provenance": meta, "prompts": len(prompts), "tokens": args.tokens, "identical": identical,
              "chosen_by_default": "packed" if chosen.info["onednn_linears"] else "stock",
              "ms_per_token": {way: 1000 * seconds[way] / tokens[way] for way in models}}
    result["stock_speedup"] = result["ms_per_token"]["packed"] / result["ms_per_token"]["stock"]
    result["forward_ms"] = {}
    for way, m in models.items():
        costs = calibrate(m, long_context=0, max_k=17, drafter_names=[])
        result["forward_ms"][way] = {"step": 1000 * costs.step_s,
                                     **{str(k): 1000 * costs.step_s * c for k, c in sorted(costs.verify_curve.items())
                                        if k in (2, 3, 5, 9, 13, 17)}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"plain decoding, ms a token: packed {result['ms_per_token']['packed']:.1f}, stock "
          f"{result['ms_per_token']['stock']:.1f} (stock {result['stock_speedup']:.2f}x as fast); "
          f"{identical}/{len(prompts)} outputs identical; load_model's default chose {result['chosen_by_default']}")
    for way, row in result["forward_ms"].items():
        print(f"{way}: forward over k tokens, ms: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()))


if __name__ == "__main__":
    main()
