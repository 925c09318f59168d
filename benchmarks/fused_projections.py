"""What fusing the projections of one input saves (issue 35: the verifier toward its floor): a one-token plain step and
a 5-token verification of the default model, float32, after a 300-token context, with the projections fused
(:func:`leap.core.modeling.fast_linear.fuse_projections`, the default) and separate (the same oneDNN linears, one
product each), swapped in place in one model and timed alternately; medians of repeats, and the logits' largest
difference between the two.

Usage: python benchmarks/fused_projections.py [--repeats 40] [--threads 2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from leap.core.decoding.batch_state import BatchState
from leap.core.modeling.fast_linear import FusedProjection, OneDNNLinear, SiblingProjection
from leap.core.modeling.layers import LayerStack
from leap.core.modeling.model import load_model
from leap.core.runtime.provenance import provenance


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--context", type=int, default=300)
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model("smollm2")
    variants: dict[str, list] = {"fused": [], "separate": []}
    for parent in list(model.hf_model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, (FusedProjection, SiblingProjection)):
                plain = torch.nn.Linear(child.in_features, child.out_features, bias=child.bias is not None)
                plain.weight, plain.bias = child.weight, child.bias
                variants["fused"].append((parent, name, child))
                variants["separate"].append((parent, name, OneDNNLinear(plain)))

    def use(label: str) -> None:
        for parent, name, module in variants[label]:
            setattr(parent, name, module)

    state = BatchState(LayerStack(model), 1, args.context + 64)
    gen = torch.Generator().manual_seed(0)
    result = {"context": args.context, "threads": args.threads, "projections": len(variants["fused"]),
              "provenance": provenance(model), "ms": {}}
    with torch.inference_mode():
        state.forward(torch.randint(100, 20000, (1, args.context), generator=gen), torch.arange(args.context)[None],
                      torch.ones(1, args.context, dtype=torch.bool))

        def step(label: str, q: int) -> torch.Tensor:
            use(label)
            start = state.slots
            hidden = state.forward(torch.arange(500, 500 + q)[None], torch.arange(args.context, args.context + q)[None],
                                   torch.ones(1, q, dtype=torch.bool))
            logits = model.lm_head(model.norm(hidden))
            state.keep(start, [0])
            return logits

        for q in (1, 5):
            diff = (step("fused", q) - step("separate", q)).abs().max().item()
            times: dict[str, list[float]] = {"fused": [], "separate": []}
            for _ in range(args.repeats):
                for label in times:
                    use(label)
                    t0 = time.perf_counter()
                    step(label, q)
                    times[label].append(time.perf_counter() - t0)
            ms = {label: 1000 * statistics.median(v) for label, v in times.items()}
            result["ms"][q] = {**ms, "max_logit_difference": diff}
            print(f"{q} token(s): fused {ms['fused']:.2f} ms, separate {ms['separate']:.2f} ms "
                  f"(separate / fused {ms['separate'] / ms['fused']:.3f}); logits differ by at most {diff:.2e}")
    use("fused")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
