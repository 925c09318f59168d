"""``leap bench``: the Spec-Bench harness (:mod:`leap.bench.harness`), every method interleaved per prompt,
JSONL records, ``--resume``, ``--ray``; and ``leap sweep``: search agents x redundancy metrics x seeds on the
same prompts, through the same harness.

A sweep's every combination is one benchmark method, labelled ``AGENT/GROUP_METRIC/ZONE_METRIC/sSEED`` (both
metrics always: a label that dropped the one not swept could not say which ablation a record is), run by :class:`leap.bench.methods.SearchMethod`
with that agent, metric and seed - the search loop the environments wrap, on real decoding, with plain
decoding interleaved per prompt as the baseline. So a sweep inherits everything of ``leap bench``: one wall
clock per call, records and ``--resume``, the lossless check, ``leap report`` with intervals over prompts,
and ``--ray``. ``--reward cost`` makes the searches deterministic (the cost model).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Any

from leap.cli.common import add_model_args, fast_linear_of, import_modules, load_for, method_args


def add_parser(sub) -> None:
    _add_bench_parser(sub)
    _add_sweep_parser(sub)


def _add_bench_parser(sub) -> None:
    b = sub.add_parser("bench", help="Spec-Bench harness: methods and peers interleaved per prompt, JSONL records")
    b.add_argument("--methods", default="ar,leap,hf-pld",
                   help="comma-separated methods (`leap bench --list-methods`); ar is always run first. "
                        "LABEL=NAME runs NAME under its own label, so one method can run with different "
                        "--method-arg LABEL:KEY=VALUE settings (e.g. suffix,suffix-tree=suffix)")
    b.add_argument("--list-methods", action="store_true", help="print the method names and exit")
    b.add_argument("--method-arg", action="append", default=[], metavar="METHOD:KEY=VALUE",
                   help="constructor argument for one method, e.g. hf-pld:num_tokens=3 (repeatable)")
    add_harness_args(b, "results/bench")


def add_harness_args(b, out: str) -> None:
    """The harness's arguments, shared with ``leap sweep``: model, prompts, decoding, search, records, Ray."""
    add_model_args(b)
    b.add_argument("--prompts", default=None, help="JSONL prompt file (question_id, category, turns); default: Spec-Bench")
    b.add_argument("--categories", default=None, help="comma-separated categories (default: all in the file)")
    b.add_argument("--num-prompts", type=int, default=None,
                   help="prompts per category (default: 2 of Spec-Bench's; every prompt of a --prompts file)")
    b.add_argument("--max-new-tokens", type=int, default=128)
    b.add_argument("--temperature", default="0", help="one or more comma-separated temperatures, e.g. 0,1")
    b.add_argument("--runs", type=int, default=1, help="repeat every generation R times (default 1)")
    b.add_argument("--warmup", type=int, default=1, help="warm-up passes over the methods before timing (default 1)")
    b.add_argument("--first-turn-only", action="store_true", help="run only the first turn of multi-turn questions")
    b.add_argument("--batch-size", type=int, default=1, metavar="B",
                   help="decode the prompts' first turns B at a time (ar and drafters without layers; "
                        "--method-arg M:batch_cap=N|auto); one record per batch, speedup = throughput ratio")
    b.add_argument("--budget", type=int, default=40, help="search iterations per prompt (default 40)")
    b.add_argument("--reward", choices=["measured", "cost"], default="measured")
    b.add_argument("--min-speedup", type=float, default=1.0)
    b.add_argument("--give-up", type=int, default=10)
    b.add_argument("--loss-budget", type=float, default=0.03, help="the most the search may lose before a configuration pays, as a fraction of the request's plain-decoding time (default 0.03; 0 = no limit)")
    b.add_argument("--steps-per-trial", type=int, default=1,
                   help="real steps per search iteration (default 1; per method: --method-arg M:steps_per_trial=4)")
    b.add_argument("--draft-policy", default="confidence", help="draft-length policy of layer-skip drafts")
    b.add_argument("--tree-verify", default="match", metavar="RULE",
                   help="tree verification rule under sampling for every method: match (default) or traversal; "
                        "per method: --method-arg stand:tree_verify=traversal")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module first (one that registers your agent, drafter or method)")
    b.add_argument("--no-chat", dest="chat", action="store_false", default=True)
    b.add_argument("--out", default=out, help=f"results folder (records.jsonl); default {out}")
    b.add_argument("--resume", action="store_true", help="continue the run in --out, skipping finished generations")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="spread the prompts over Ray actors, each loading the model once (one per GPU, else per "
                        "--ray-cpus CPUs): a local Ray instance, or an existing cluster's ADDRESS (auto, HOST:6379, "
                        "ray://HOST:10001); needs pip install 'leap[ray]'")
    b.add_argument("--ray-workers", type=int, default=None, help="how many Ray actors (default: as the cluster allows)")
    b.add_argument("--ray-cpus", type=float, default=None, help="CPUs per Ray actor (default: --threads or 1)")


def run(args: argparse.Namespace) -> int:
    import_modules(args.imports)
    if args.command == "sweep":
        return _run_sweep(args)
    from leap.bench.methods import method_names

    if args.list_methods:
        print("\n".join(method_names()))
        return 0
    return execute(args, [m.strip() for m in args.methods.split(",")], method_args(args.method_arg))


def execute(args: argparse.Namespace, methods: list[str], per_method: dict[str, dict]) -> int:
    """Run ``methods`` (labels, ``LABEL=NAME`` allowed) with ``per_method`` arguments through the harness, serially
    or on Ray; print Table 1."""
    from leap.bench.harness import Bench, BenchSettings
    from leap.bench.methods import BenchOptions
    from leap.bench.records import RECORDS_FILE
    from leap.bench.report import busy_warning, summarise, table1_markdown
    from leap.data import load_prompts, pick_per_category

    # a file of one's own runs whole unless told; Spec-Bench, 2 per category (a file with one category ran 2 prompts)
    per_category = args.num_prompts if args.num_prompts is not None else (2 if args.prompts is None else None)
    rows = pick_per_category(load_prompts(args.prompts), per_category,
                             args.categories.split(",") if args.categories else None)
    if args.first_turn_only:
        rows = [{**r, "turns": r["turns"][:1]} for r in rows]
    if args.batch_size > 1:  # batches made once, here, so that Ray workers take whole batches
        from leap.bench.harness import batches

        rows = batches(rows, args.batch_size)
    try:
        temps = [float(t) for t in args.temperature.split(",")]
    except ValueError:
        raise SystemExit(f"leap: --temperature takes numbers like 0 or 0,1; got {args.temperature!r}") from None
    settings = BenchSettings(
        methods=methods, temperatures=temps, max_new_tokens=args.max_new_tokens,
        runs=args.runs, warmup=args.warmup, chat=args.chat, seed=args.seed, method_args=per_method,
        batch_size=args.batch_size,
        options=BenchOptions(budget=args.budget, reward=args.reward, min_speedup=args.min_speedup,
                             give_up=args.give_up, draft_policy=args.draft_policy, seed=args.seed,
                             steps_per_trial=args.steps_per_trial, tree_verify=args.tree_verify,
                             loss_budget=args.loss_budget))
    try:
        if args.ray is not None:  # Ray is imported only here
            from leap.bench.on_ray import run_bench_on_ray

            load = {"model": args.model, "device": args.device, "dtype": args.dtype,
                    "fast_linear": fast_linear_of(args), "threads": args.threads,
                    "imports": list(args.imports)}
            records = run_bench_on_ray(load, rows, settings, args.out, resume=args.resume,
                                       address=None if args.ray == "local" else args.ray, workers=args.ray_workers,
                                       cpus_per_worker=args.ray_cpus, progress=not args.quiet).records
        else:
            bench = Bench(load_for(args), rows, settings, args.out, resume=args.resume, progress=not args.quiet)
            records = bench.run().records
    except KeyboardInterrupt:
        print(f"\ninterrupted; finished generations are in {args.out} (continue with --resume)", file=sys.stderr)
        return 130
    print(table1_markdown(summarise(records)))
    if (busy := busy_warning(records)):
        print(busy, file=sys.stderr)
    print(f"records: {Path(args.out) / RECORDS_FILE}; tables: leap report {args.out}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------- leap sweep
def _add_sweep_parser(sub) -> None:
    s = sub.add_parser("sweep", help="agents x metrics x seeds on the same prompts (the bench harness; --ray)")
    s.add_argument("--agents", default="leap,ucb,bayes,random", help="comma-separated agents (`leap agents`)")
    s.add_argument("--group-metrics", default="ear-gain", help="comma-separated metrics in LEAP's group role")
    s.add_argument("--zone-metrics", default="residual-ratio", help="comma-separated metrics in LEAP's zone role")
    s.add_argument("--seeds", default="0", help="comma-separated agent seeds, e.g. 0,1,2")
    add_harness_args(s, "results/sweep")


def sweep_methods(agents: list[str], zone_metrics: list[str], group_metrics: list[str], seeds: list[int]
                  ) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Method entries (``LABEL=AGENT``) and their arguments for every combination."""
    methods, per_method = ["ar"], {}
    for agent, zone, group, seed in itertools.product(agents, zone_metrics, group_metrics, seeds):
        label = f"{agent}/{group}/{zone}/s{seed}"
        methods.append(f"{label}={agent}")
        per_method[label] = {"zone_metric": zone, "group_metric": group, "seed": seed}
    return methods, per_method


def _run_sweep(args: argparse.Namespace) -> int:
    from leap.core.errors import SettingsError
    from leap.redundancy.base import redundancy_metrics
    from leap.search.base import search_agents

    split = lambda text: [x.strip() for x in text.split(",") if x.strip()]  # noqa: E731
    agents, zones, groups = split(args.agents), split(args.zone_metrics), split(args.group_metrics)
    unknown = [a for a in agents if a != "leap" and a not in search_agents] + \
        [m for m in zones + groups if m not in redundancy_metrics]
    if unknown:
        raise SettingsError(f"leap sweep: unknown agent or metric {', '.join(unknown)}; see `leap agents` and "
                            "`leap metrics`")
    try:
        seeds = [int(x) for x in split(args.seeds)]
    except ValueError:
        raise SettingsError(f"leap sweep: --seeds takes integers like 0,1,2; got {args.seeds!r}") from None
    methods, per_method = sweep_methods(agents, zones, groups, seeds)
    return execute(args, methods, per_method)
