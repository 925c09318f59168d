"""``leap redundancy``: per-layer redundancy metrics, LEAP's zones and groups over Spec-Bench prompts
(:mod:`leap.redundancy.analysis`), optionally Observation 1 and plots.
"""

from __future__ import annotations

import argparse
import json

from leap.cli.common import add_metric_args, add_model_args, import_modules, load_for, method_args


def add_parser(sub) -> None:
    r = sub.add_parser("redundancy", help="per-layer redundancy metrics, zones and groups (LEAP Stage I)")
    add_model_args(r)
    r.add_argument("--prompts", default=None, help="JSONL prompt file (Spec-Bench fields); default: shipped Spec-Bench")
    r.add_argument("--per-category", type=int, default=2, help="prompts per category (default 2)")
    r.add_argument("--categories", default=None, help="comma-separated categories (default: all in the file)")
    r.add_argument("--positions", type=int, default=8, help="last N prompt positions the metrics use (default 8)")
    r.add_argument("--r-percentile", type=float, default=70.0)
    r.add_argument("--ear-percentile", type=float, default=70.0)
    add_metric_args(r)
    r.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module first (one that registers your own metric)")
    r.add_argument("--no-zones", action="store_true", help="ablation: every layer middle-like")
    r.add_argument("--no-groups", action="store_true", help="ablation: one decision unit per layer")
    r.add_argument("--no-chat", dest="chat", action="store_false", default=True)
    r.add_argument("--observation1", action="store_true", help="also measure LEAP's Observation 1 (decodes each prompt)")
    r.add_argument("--steps", default="16,32,64", help="decoded-token counts for Observation 1")
    r.add_argument("--json", action="store_true", help="print the report as one JSON object")
    r.add_argument("--plot", default=None, metavar="DIR", help="write metrics.png and observation1.png to DIR")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tqdm import tqdm

    from leap.data import load_prompts, pick_per_category
    from leap.redundancy.analysis import analyse, observation1
    from leap.redundancy.zones import ZoneSettings

    import_modules(args.imports)
    from leap.redundancy.base import redundancy_metrics

    for role in (args.zone_metric, args.group_metric):
        redundancy_metrics.get(role)  # an unknown name fails here, listing the registered metrics
    model = load_for(args)
    rows = pick_per_category(load_prompts(args.prompts), args.per_category,
                             args.categories.split(",") if args.categories else None)
    if not rows:
        raise SystemExit("leap: no prompts selected; check --prompts / --categories")
    settings = ZoneSettings(r_percentile=args.r_percentile, ear_percentile=args.ear_percentile)
    with tqdm(total=len(rows), desc="prefill metrics", disable=args.json) as bar:
        report = analyse(model, rows, positions=args.positions, settings=settings, zones=not args.no_zones,
                         groups=not args.no_groups, chat=args.chat, progress=lambda c: bar.update(1),
                         zone_metric=args.zone_metric, group_metric=args.group_metric,
                         metric_args=method_args(args.metric_arg, "--metric-arg"))
    if args.observation1 or args.plot:
        steps = [int(x) for x in args.steps.split(",")]
        with tqdm(total=len(rows), desc="observation 1", disable=args.json) as bar:
            report.observation1 = observation1(model, rows, steps=steps, positions=args.positions, chat=args.chat,
                                               progress=lambda c: bar.update(1))
    data = report.to_dict()
    if args.plot:
        from leap.redundancy.plots import plot_metrics, plot_observation1

        out = Path(args.plot)
        out.mkdir(parents=True, exist_ok=True)
        paths = [plot_metrics(data, out), plot_observation1(data["observation1"], out, f"{model.name}: Observation 1")]
        (out / "redundancy.json").write_text(json.dumps(data, indent=1))
        if not args.json:
            print("wrote " + ", ".join(str(p) for p in paths) + f", {out / 'redundancy.json'}")
    if args.json:
        print(json.dumps(data))
        return 0
    _print_report(data)
    return 0


def _print_report(data: dict) -> None:
    short = {"early": "E", "middle": "M", "final": "F"}
    print(f"{data['model']}: {data['num_layers']} layers, {data['prompts']} prompts")
    names = sorted(data["metrics"])
    print("layer zone " + " ".join(f"{n:>17s}" for n in names))
    for l in range(data["num_layers"]):
        print(f"{l:5d} {data['zones'][l]:>6s} " + " ".join(f"{data['metrics'][n][l]:17.4f}" for n in names))
    print("groups: " + " ".join("[" + ",".join(map(str, g)) + "]" for g in data["groups"]))
    print(f"search space: {len(data['groups'])} decision units, {data['space_size']} configurations")
    for cat, info in data["by_category"].items():
        zones = "".join(short[z] for z in info["zones"])
        print(f"  {cat:16s} {zones}  agreement {data['zone_agreement'][cat]:.0%}, {len(info['groups'])} groups")
    obs = data.get("observation1") or {}
    for name, by_step in (obs.get("overall") or {}).items():
        cells = ", ".join(f"{s} tokens: {v:.2f}" for s, v in by_step.items())
        print(f"Observation 1, {name}: Spearman rho vs prefill: {cells}")
