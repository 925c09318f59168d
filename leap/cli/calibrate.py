"""``leap calibrate``: this machine's costs for a model (:mod:`leap.core.decoding.calibrate`), cached.
"""

from __future__ import annotations

import argparse
import json

from leap.cli.common import add_model_args, load_for


def add_parser(sub) -> None:
    ca = sub.add_parser("calibrate", help="measure this machine's costs for a model (c(k), draft costs, drafters)")
    add_model_args(ca)
    ca.add_argument("--refresh", action="store_true", help="measure again even if a cached calibration exists")
    ca.add_argument("--json", action="store_true", help="print the calibration as one JSON object")


def run(args: argparse.Namespace) -> int:
    from leap.core.decoding.calibrate import calibration_for

    model = load_for(args)
    costs = calibration_for(model, refresh=args.refresh)
    if args.json:
        print(json.dumps(costs.to_dict()))
        return 0
    print(f"{model.name} on {costs.key['device']} ({costs.key['dtype']}, {costs.key['threads']} threads): "
          f"one-token step {costs.step_s * 1000:.2f} ms")
    print("verification c(k) = forward over k tokens / one token: "
          + ", ".join(f"{k}: {v:.2f}" for k, v in costs.verify_curve.items())
          + f" (at {costs.context} tokens of context; trees planned up to {costs.max_tree_nodes} nodes)")
    if costs.long_curve:
        print(f"c(k) at {costs.long_context} tokens of context: "
              + ", ".join(f"{k}: {v:.2f}" for k, v in costs.long_curve.items())
              + " (between the two contexts, c is interpolated linearly)")
    print(f"draft: {costs.layer_cost:.4f} per layer pass, {costs.head_cost:.4f} per token beyond layers "
          "(embedding, norm, LM head, overhead); one-token draft forward by executed layers: "
          + ", ".join(f"{n}: {v:.2f}" for n, v in costs.draft_curve.items()))
    print("model-free drafters' overhead per step: "
          + ", ".join(f"{n}: {v:.4f}" for n, v in costs.drafter_overhead.items()))
    return 0
