"""leap's plain decoding against transformers' generate on a random model of real size (docs/gpu.md).

    python experiments/2026-11-26-gpu-plain-vs-generate/gpu_plain_vs_generate.py --device cuda --preset llama3-8b --dtypes bfloat16,float32

Per dtype: three timed rounds of each (after one warm-up), 64 new tokens from a 64-token random prompt, tokens/s
and whether the greedy tokens agree. Random weights: costs only, nothing about acceptance.
"""
import argparse
import json
import time

import torch

from leap.bench.smoke import build_random_model
from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.runtime.device import wall_clock
from leap.core.runtime.provenance import provenance


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--preset", default="llama3-8b")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    out = {"provenance": provenance(), "runs": []}
    for name in args.dtypes.split(","):
        dtype = getattr(torch, name)
        model = build_random_model(args.preset, args.device, dtype)
        dev = torch.device(args.device)
        prompt = torch.randint(0, model.vocab_size, (64,), generator=torch.Generator().manual_seed(0)).tolist()
        ids = torch.tensor([prompt], device=dev)

        def leap_plain():
            return list(SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=args.new).token_ids)

        def hf():
            with torch.inference_mode():
                o = model.hf_model.generate(ids, max_new_tokens=args.new, min_new_tokens=args.new, do_sample=False)
            return o[0, len(prompt):].tolist()

        row = {"dtype": name}
        for label, fn in (("leap_plain", leap_plain), ("hf_generate", hf)):
            fn()
            times = []
            for _ in range(args.rounds):
                t0 = wall_clock(dev)
                toks = fn()
                times.append(wall_clock(dev) - t0)
            row[label + "_tok_s"] = [round(len(toks) / t, 2) for t in times]
            row[label + "_tokens"] = toks
        row["agree_prefix"] = next((i for i, (a, b) in enumerate(zip(row["leap_plain_tokens"], row["hf_generate_tokens"]))
                                    if a != b), len(row["leap_plain_tokens"]))
        del row["leap_plain_tokens"], row["hf_generate_tokens"]
        print(json.dumps(row), flush=True)
        out["runs"].append(row)
        del model
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
