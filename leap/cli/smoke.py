"""``leap smoke``: every path on a random model of real size (:mod:`leap.bench.smoke`).
"""

from __future__ import annotations

import argparse
import json
import sys

from leap.cli.common import kv_args


def add_parser(sub) -> None:
    sm = sub.add_parser("smoke", help="every path on a random model of real size (presets tiny, llama3-8b)")
    sm.add_argument("--preset", default="tiny", help="tiny (default) or llama3-8b")
    sm.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1 ...")
    sm.add_argument("--dtype", default="float32", help="float32 (default), bfloat16, float16")
    sm.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a config field of the preset, e.g. num_hidden_layers=8 (repeatable)")
    sm.add_argument("--paths", default=None,
                    help="comma-separated subset of plain,fixed-config,leap,drafter,select,redundancy,env,batch,calibration")
    sm.add_argument("--prompt-tokens", type=int, default=64)
    sm.add_argument("--max-new-tokens", type=int, default=32)
    sm.add_argument("--budget", type=int, default=12, help="search iterations of the leap path")
    sm.add_argument("--batch-size", type=int, default=4, help="rows of the batch path (default 4)")
    sm.add_argument("--threads", type=int, default=None)
    sm.add_argument("--json", action="store_true", help="print the report as one JSON object")


def run(args: argparse.Namespace) -> int:
    from leap.bench.smoke import SmokeSettings, run_smoke

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    settings = SmokeSettings(preset=args.preset, device=args.device, dtype=args.dtype,
                             overrides=kv_args(args.overrides), prompt_tokens=args.prompt_tokens,
                             max_new_tokens=args.max_new_tokens, budget=args.budget,
                             batch_size=args.batch_size)
    if args.paths:
        settings.paths = tuple(p.strip() for p in args.paths.split(","))
    report = run_smoke(settings, progress=None if args.json else lambda m: print(f"[smoke] {m}", file=sys.stderr))
    if args.json:
        print(json.dumps(report))
        return 0 if report["ok"] else 1
    print(f"{report['preset']} ({report['parameters_b']:.2f}B parameters, {report['layers']} layers) on "
          f"{report['device']} {report['device_name']}, {report['dtype']}")
    for name, status in report["paths"].items():
        tps = report["tokens_per_s"].get(name)
        same = report["outputs_identical"].get(name)
        extra = (f", {tps:.1f} tok/s" if tps else "") + ("" if same is None else f", identical: {same}")
        print(f"  {name:14s} {status}{extra}")
    for label, rows in report.get("batch_rows_identical", {}).items():
        print(f"  {label}: {sum(rows)}/{len(rows)} rows identical to decoding each prompt alone")
    for name, div in report["divergence"].items():
        print(f"  {name} diverges at token {div.get('position')}: top-2 logit margin {div.get('margin')}")
    if "verify_curve" in report:
        print("  c(k): " + ", ".join(f"{k}: {v:.2f}" for k, v in report["verify_curve"].items()))
        print("  draft cost by skipped layers: " + ", ".join(f"{k}: {v:.2f}" for k, v in report["draft_cost"].items()))
    print(f"  identical: {report['identical']}; identity rate {report['identity_rate']}; "
          f"peak memory {report['peak_memory_gib']:.2f} GiB")
    return 0 if report["ok"] else 1
