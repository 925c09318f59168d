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
    ca.add_argument("--batch-sizes", default="",
                    help="also measure batched verification at these row counts, e.g. 2,4,8 (issue 37: where it turns "
                         "compute-bound; `leap bench --batch-size` measures them on first use)")


def run(args: argparse.Namespace) -> int:
    from leap.core.decoding.calibrate import batch_calibration_for, calibration_for
    from leap.core.errors import SettingsError

    try:
        sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    except ValueError:
        raise SettingsError(f"--batch-sizes takes row counts separated by commas, e.g. 2,4,8; got {args.batch_sizes!r}") from None
    if any(b < 1 for b in sizes):
        raise SettingsError(f"--batch-sizes takes row counts of at least 1, e.g. 2,4,8; got {args.batch_sizes!r}")
    model = load_for(args)
    costs = (batch_calibration_for(model, sizes, refresh=args.refresh) if sizes
             else calibration_for(model, refresh=args.refresh))
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
    for rows, curve in sorted(costs.batch_curves.items()):
        one = curve[min(curve)]
        print(f"{rows} rows: one token a row costs {one:.2f} one-row steps; verifying chains of k draft tokens, in plain "
              f"steps of {rows} rows: " + ", ".join(f"{q - 1}: {v / one:.2f}" for q, v in sorted(curve.items()) if q > 1))
    print("model-free drafters' overhead per step: "
          + ", ".join(f"{n}: {v:.4f}" for n, v in costs.drafter_overhead.items()))
    return 0
