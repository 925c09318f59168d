"""Issue 35 (the verifier toward its floor): where a plain decoding step's time goes, by torch operator.

Loads the default model as ``load_model`` does (the linears it measures faster here), decodes one of leap's seed prompts
plainly under torch's profiler, and reports the wall time per token, the matrix products' share (``aten::mm``/
``aten::addmm``: the linears, the only operators that read the weights) and the rest - the small operators (norms,
rotary, activation, residual adds, attention) and the time outside any operator (Python, transformers' and leap's
code). The bandwidth floor of the products is the weights' bytes over their time. Writes one JSON object to ``--out``.

    python experiments/2026-11-26-step-profile/step_profile.py --out docs/data/step_profile.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from leap.core import SelfSpecDecoder, load_model
from leap.core.runtime.provenance import provenance
from leap.heads.prompts import seed_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    meta = provenance()
    torch.set_num_threads(args.threads)
    model = load_model("smollm2")
    ids = model.encode(seed_prompts(1)[0], chat=True)
    decoder = SelfSpecDecoder(model, None)
    decoder.generate(ids, max_new_tokens=8)  # warm
    start = time.perf_counter()
    decoder.generate(ids, max_new_tokens=args.tokens)
    plain_ms = 1000 * (time.perf_counter() - start) / args.tokens  # without the profiler's overhead
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        decoder.generate(ids, max_new_tokens=args.tokens)
        wall = time.perf_counter() - start
    ops = {e.key: e.self_cpu_time_total / 1000 for e in prof.key_averages()}  # ms, over the whole call
    products = sum(v for k, v in ops.items() if k in ("aten::mm", "aten::addmm", "aten::bmm", "mkldnn::_linear_pointwise"))
    total_ops = sum(ops.values())
    weights = sum(p.numel() * p.element_size() for p in model.hf_model.parameters())
    per_token = {"products": products / args.tokens, "other operators": (total_ops - products) / args.tokens,
                 "outside operators": max(1000 * wall - total_ops, 0.0) / args.tokens}
    result = {"provenance": meta, "tokens": args.tokens, "linears": "packed" if model.info["onednn_linears"] else "stock",
              "plain_ms_per_token": plain_ms, "profiled_ms_per_token": 1000 * wall / args.tokens,
              "ms_per_token_profiled": per_token, "weights_mb": weights / 1e6,
              "products_gb_s": weights / (per_token["products"] / 1000) / 1e9,
              "top_operators_ms": dict(sorted(ops.items(), key=lambda kv: -kv[1])[:12])}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"plain step {plain_ms:.1f} ms a token ({result['profiled_ms_per_token']:.1f} under the profiler): products "
          f"{per_token['products']:.1f} ms ({result['products_gb_s']:.1f} GB/s over {weights / 1e6:.0f} MB of weights), "
          f"other operators {per_token['other operators']:.1f} ms, outside operators {per_token['outside operators']:.1f} ms")


if __name__ == "__main__":
    main()
