"""The ``leap`` command line.

``leap generate PROMPT`` decodes one prompt on the default model (or ``--model``), plainly
(``--method ar``) or self-speculatively under a layer configuration (``--config`` / ``--skip`` /
``--repeat``); ``--compare`` also runs plain decoding and reports the speedup and whether the tokens
are identical. ``leap redundancy`` prints per-layer redundancy metrics, LEAP's zones and groups
(``--json``, ``--plot DIR``). ``leap policies`` and ``leap metrics`` list the registries.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "build_parser"]


def _kv_args(items: Sequence[str], what: str = "--policy-arg / --agent-arg / --drafter-arg") -> dict[str, Any]:
    from leap.core.options import parse_assignments

    return parse_assignments(items, what)


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="smollm2", help="smollm2 (default), a .gguf file, a model folder or a hub id")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:1 ...")
    p.add_argument("--dtype", default=None, help="float32 (CPU default), bfloat16 (GPU default), float16")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--no-fast-linear", action="store_true", help="keep torch's own float32 linears on the CPU")


def _add_metric_args(p: argparse.ArgumentParser) -> None:
    """Which registered metrics fill LEAP's two roles (leap.redundancy.build), and their arguments."""
    p.add_argument("--zone-metric", default="residual-ratio",
                   help="the metric in LEAP's R role (early zone), any of `leap metrics` (default residual-ratio)")
    p.add_argument("--group-metric", default="ear-gain",
                   help="the metric in LEAP's Delta L role (final zone, group cuts; default ear-gain)")
    p.add_argument("--metric-arg", action="append", default=[], metavar="NAME:KEY=VALUE",
                   help="constructor argument of one metric, e.g. test-layer-index:scale=2 (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leap", description="Self-speculative decoding workbench")
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="decode one prompt (plain or self-speculative)")
    g.add_argument("prompt", help="the prompt text (use --chat to wrap it in the chat template)")
    _add_model_args(g)
    g.add_argument("--method", default=None,
                   help="ar (plain), self-spec (fixed --config), leap (zone-aware MCTS), or any agent from "
                        "`leap agents` (mcts, ucb, bayes, random, swift, clasp, zone-rule); default: self-spec "
                        "when a config is given, else leap")
    g.add_argument("--no-zones", action="store_true", help="ablation: every layer middle-like (EXECUTE/SKIP)")
    g.add_argument("--no-groups", action="store_true", help="ablation: one decision unit per layer")
    g.add_argument("--no-search", action="store_true", help="ablation: zones + groups with a fixed rule (no MCTS)")
    _add_metric_args(g)
    g.add_argument("--budget", type=int, default=40, help="search iterations per prompt (default 40)")
    g.add_argument("--reward", choices=["measured", "cost"], default="measured",
                   help="measured speedup (default) or the deterministic cost model")
    g.add_argument("--min-speedup", type=float, default=1.0,
                   help="fall back to plain decoding unless the best configuration's mean reward reaches this")
    g.add_argument("--give-up", type=int, default=10,
                   help="stop searching after N iterations if no step reached --min-speedup (0 = never)")
    g.add_argument("--steps-per-trial", type=int, default=1,
                   help="real steps per search iteration, rewarded together (default 1, LEAP's)")
    g.add_argument("--carry-over", type=int, default=0,
                   help="reuse a choice that paid for up to N following prompts without searching (default 0)")
    g.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module first (e.g. one that registers your own agent or policy)")
    g.add_argument("--agent-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="agent constructor argument (JSON values), e.g. ratio_band=[0.75,0.95] (repeatable)")
    g.add_argument("--config", default=None, help="compact (EESR...) or sparse (skip=5-7;repeat=28) configuration")
    g.add_argument("--skip", default=None, help="layers to skip in the draft, e.g. 5,6,7 or 10-14")
    g.add_argument("--repeat", default=None, help="layers the draft runs twice, e.g. 28")
    g.add_argument("--draft-policy", default="confidence", help="when to stop drafting (see `leap policies`)")
    g.add_argument("--policy-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="policy constructor argument, e.g. threshold=0.7 or k=4 (repeatable)")
    g.add_argument("--draft-vocab", type=int, default=None, help="restrict the draft LM head to N frequent tokens")
    g.add_argument("--drafter", default=None,
                   help="a drafter (see `leap drafters`): prompt-lookup, suffix, token-recycling (model-free), hybrid "
                        "(model-free, continued by the --skip/--config draft), layer-skip")
    g.add_argument("--drafter-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="drafter constructor argument, e.g. num_tokens=10 (repeatable)")
    g.add_argument("--drafters", default=None, metavar="OPTIONS",
                   help="search over drafters jointly with the layers: 'default' or ';'-separated options, e.g. "
                        "'layer-skip;prompt-lookup:num_tokens=4;suffix;token-recycling;hybrid'")
    g.add_argument("--tree-verify", default="match", metavar="RULE",
                   help="how draft trees are verified under sampling: match (default) or traversal "
                        "(Traversal Verification; see `leap.core.tree_rules`)")
    g.add_argument("--no-reuse-prefix", action="store_true", help="recompute the exact-prefix layers in verification")
    g.add_argument("--max-new-tokens", type=int, default=128)
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=None)
    chat = g.add_mutually_exclusive_group()
    chat.add_argument("--chat", dest="chat", action="store_true", default=True, help="apply the chat template (default)")
    chat.add_argument("--no-chat", dest="chat", action="store_false")
    g.add_argument("--compare", action="store_true",
                   help="also decode plainly, interleaved (warm-up, then --repeats rounds alternating which goes "
                        "first); report the median speedup, its spread and token identity")
    g.add_argument("--repeats", type=int, default=3, help="timed rounds of --compare (default 3)")
    g.add_argument("--json", action="store_true", help="print the outcome record as one JSON object")

    sub.add_parser("policies", help="list the registered draft-length policies")
    sub.add_parser("metrics", help="list the registered redundancy metrics")
    sub.add_parser("agents", help="list the registered search agents")
    sub.add_parser("drafters", help="list the registered model-free drafters")

    r = sub.add_parser("redundancy", help="per-layer redundancy metrics, zones and groups (LEAP Stage I)")
    _add_model_args(r)
    r.add_argument("--prompts", default=None, help="JSONL prompt file (Spec-Bench fields); default: shipped Spec-Bench")
    r.add_argument("--per-category", type=int, default=2, help="prompts per category (default 2)")
    r.add_argument("--categories", default=None, help="comma-separated categories (default: all in the file)")
    r.add_argument("--positions", type=int, default=8, help="last N prompt positions the metrics use (default 8)")
    r.add_argument("--r-percentile", type=float, default=70.0)
    r.add_argument("--ear-percentile", type=float, default=70.0)
    _add_metric_args(r)
    r.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module first (one that registers your own metric)")
    r.add_argument("--no-zones", action="store_true", help="ablation: every layer middle-like")
    r.add_argument("--no-groups", action="store_true", help="ablation: one decision unit per layer")
    r.add_argument("--no-chat", dest="chat", action="store_false", default=True)
    r.add_argument("--observation1", action="store_true", help="also measure LEAP's Observation 1 (decodes each prompt)")
    r.add_argument("--steps", default="16,32,64", help="decoded-token counts for Observation 1")
    r.add_argument("--json", action="store_true", help="print the report as one JSON object")
    r.add_argument("--plot", default=None, metavar="DIR", help="write metrics.png and observation1.png to DIR")
    b = sub.add_parser("bench", help="Spec-Bench harness: methods and peers interleaved per prompt, JSONL records")
    _add_model_args(b)
    b.add_argument("--methods", default="ar,leap,hf-pld",
                   help="comma-separated methods (`leap bench --list-methods`); ar is always run first. "
                        "LABEL=NAME runs NAME under its own label, so one method can run with different "
                        "--method-arg LABEL:KEY=VALUE settings (e.g. suffix,suffix-tree=suffix)")
    b.add_argument("--list-methods", action="store_true", help="print the method names and exit")
    b.add_argument("--method-arg", action="append", default=[], metavar="METHOD:KEY=VALUE",
                   help="constructor argument for one method, e.g. hf-pld:num_tokens=3 (repeatable)")
    b.add_argument("--prompts", default=None, help="JSONL prompt file (question_id, category, turns); default: Spec-Bench")
    b.add_argument("--categories", default=None, help="comma-separated categories (default: all in the file)")
    b.add_argument("--num-prompts", type=int, default=2, help="prompts per category (default 2)")
    b.add_argument("--max-new-tokens", type=int, default=128)
    b.add_argument("--temperature", default="0", help="one or more comma-separated temperatures, e.g. 0,1")
    b.add_argument("--runs", type=int, default=1, help="repeat every generation R times (default 1)")
    b.add_argument("--warmup", type=int, default=1, help="warm-up passes over the methods before timing (default 1)")
    b.add_argument("--first-turn-only", action="store_true", help="run only the first turn of multi-turn questions")
    b.add_argument("--budget", type=int, default=40, help="search iterations per prompt (default 40)")
    b.add_argument("--reward", choices=["measured", "cost"], default="measured")
    b.add_argument("--min-speedup", type=float, default=1.0)
    b.add_argument("--give-up", type=int, default=10)
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
    b.add_argument("--out", default="results/bench", help="results folder (records.jsonl); default results/bench")
    b.add_argument("--resume", action="store_true", help="continue the run in --out, skipping finished generations")
    b.add_argument("--quiet", action="store_true", help="no progress bar")

    sm = sub.add_parser("smoke", help="every path on a random model of real size (presets tiny, llama3-8b)")
    sm.add_argument("--preset", default="tiny", help="tiny (default) or llama3-8b")
    sm.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1 ...")
    sm.add_argument("--dtype", default="float32", help="float32 (default), bfloat16, float16")
    sm.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a config field of the preset, e.g. num_hidden_layers=8 (repeatable)")
    sm.add_argument("--paths", default=None,
                    help="comma-separated subset of plain,fixed-config,leap,drafter,select,redundancy,env,calibration")
    sm.add_argument("--prompt-tokens", type=int, default=64)
    sm.add_argument("--max-new-tokens", type=int, default=32)
    sm.add_argument("--budget", type=int, default=12, help="search iterations of the leap path")
    sm.add_argument("--threads", type=int, default=None)
    sm.add_argument("--json", action="store_true", help="print the report as one JSON object")

    ca = sub.add_parser("calibrate", help="measure this machine's costs for a model (c(k), draft costs, drafters)")
    _add_model_args(ca)
    ca.add_argument("--refresh", action="store_true", help="measure again even if a cached calibration exists")
    ca.add_argument("--json", action="store_true", help="print the calibration as one JSON object")

    rp = sub.add_parser("report", help="LEAP Table 1 / Table 2 from a `leap bench` folder")
    rp.add_argument("folder", help="the --out folder of leap bench (or its records.jsonl)")
    rp.add_argument("--format", choices=["md", "csv"], default="md")
    rp.add_argument("--plot", action="store_true", help="also write speedup_T*.png and early_speedup.png to the folder")
    rp.add_argument("--mixed", action="store_true", help="pool records written by different commits (refused otherwise)")
    return parser


def _config_from_args(args: argparse.Namespace, num_layers: int):
    from leap.core.config import LayerConfig, parse_layer_list

    if args.config and (args.skip or args.repeat):
        raise SystemExit("leap: give either --config or --skip/--repeat, not both")
    if args.config:
        return LayerConfig.parse(args.config, num_layers)
    if args.skip or args.repeat:
        return LayerConfig.from_sets(
            num_layers, skip=parse_layer_list(args.skip or ""), repeat=parse_layer_list(args.repeat or "")
        )
    return None


def _cmd_generate(args: argparse.Namespace) -> int:
    _import_modules(args.imports)
    from leap.core import SelfSpecDecoder

    model = _load_for(args)
    config = _config_from_args(args, model.num_layers)
    method = args.method or ("self-spec" if config is not None or args.drafter else "leap")
    if method == "ar":
        config = None
    elif method == "self-spec" and config is None and not args.drafter:
        raise SystemExit("leap: --method self-spec needs --config, --skip/--repeat or --drafter")
    elif method not in ("ar", "self-spec") and args.drafter:
        raise SystemExit("leap: --drafter fixes one drafter (with --method self-spec); to let the search choose "
                         "among drafters, give --drafters a,b,c")
    if args.drafters and method in ("ar", "self-spec"):
        raise SystemExit("leap: --drafters is searched over by a search method (leap, mcts, ucb, bayes, random)")
    settings = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                    seed=args.seed, chat=args.chat)

    def run_method():
        """One whole call of the method (a fresh decoder and search each time): (outcome, record)."""
        decoder = SelfSpecDecoder(
            model, config, args.draft_policy, policy_kwargs=_kv_args(args.policy_arg),
            reuse_prefix=not args.no_reuse_prefix, draft_vocab=args.draft_vocab,
            drafter=args.drafter if method != "ar" else None, drafter_kwargs=_kv_args(args.drafter_arg),
            tree_verify=args.tree_verify,
        )
        if method in ("ar", "self-spec"):
            outcome = decoder.generate(args.prompt, **settings)
            return outcome, outcome.to_dict()
        return _search(decoder)

    def _search(decoder):
        from leap.search.factory import agent_factory
        from leap.search.runner import OnlineSearch, SearchSettings

        drafters = None
        if args.drafters:
            from leap.search.drafter_space import DEFAULT_DRAFTERS

            drafters = DEFAULT_DRAFTERS if args.drafters == "default" else args.drafters.split(";")
        factory = agent_factory(method, model.num_layers, zones=not args.no_zones, groups=not args.no_groups,
                                search=not args.no_search, seed=args.seed, agent_kwargs=_kv_args(args.agent_arg),
                                drafters=drafters, zone_metric=args.zone_metric, group_metric=args.group_metric,
                                metric_args=_method_args(args.metric_arg, "--metric-arg"))
        runner = OnlineSearch(decoder, factory, SearchSettings(budget=args.budget, reward=args.reward,
                                                               min_speedup=args.min_speedup, give_up=args.give_up,
                                                               steps_per_trial=args.steps_per_trial,
                                                               carry_over=args.carry_over))
        searched = runner.generate(args.prompt, **settings)
        return searched.generation, searched.to_dict()

    if args.compare:
        from leap.bench.compare import compare

        plain_decoder = SelfSpecDecoder(model, None)
        result = compare(run_method, lambda: plain_decoder.generate(args.prompt, **settings), repeats=args.repeats,
                         tokens=lambda out: list(out[0].token_ids) if isinstance(out, tuple) else list(out.token_ids),
                         device=model.device)
        outcome, record = result.last_method
        plain = result.last_plain
        record.update(plain_tokens_per_s=plain.new_tokens / result.plain_seconds[-1],
                      speedup=result.median, speedup_low=result.low, speedup_high=result.high,
                      speedup_rounds=result.ratios, method_seconds=result.method_seconds,
                      plain_seconds=result.plain_seconds, identical_to_plain=result.identical, order=result.order,
                      call_time_s=result.method_seconds[-1])
    else:
        from leap.core.device import wall_clock

        start = wall_clock(model.device)
        outcome, record = run_method()
        record["call_time_s"] = wall_clock(model.device) - start  # the whole call: search included
    record["model"] = model.name
    record["method"] = method
    if args.json:
        print(json.dumps(record))
        return 0
    print(outcome.text)
    print("---", file=sys.stderr)
    print(
        f"{outcome.new_tokens} new tokens in {record['call_time_s']:.2f} s "
        f"({outcome.new_tokens / max(record['call_time_s'], 1e-9):.1f} tok/s, whole call), "
        f"{len(outcome.steps)} steps, mean accepted length M = {outcome.mean_accepted:.2f}, "
        f"draft acceptance {outcome.acceptance_rate:.0%}, stop: {outcome.stop_reason}",
        file=sys.stderr,
    )
    print(f"method: {method}; config: {outcome.config or 'plain decoding'}; policy: {outcome.policy}", file=sys.stderr)
    if "search_iterations" in record:
        print(f"search: {record['search_iterations']} iterations, converged: {record['converged']}, "
              f"overhead {record['search_overhead_s']:.3f} s; fixed: {record['fixed_config'] or 'plain decoding'}",
              file=sys.stderr)
    if args.compare:
        same = "identical" if record["identical_to_plain"] else "DIFFERENT (see docs on float16/bfloat16 ties)"
        print(
            f"plain decoding: {record['plain_tokens_per_s']:.1f} tok/s; speedup {record['speedup']:.2f}x "
            f"(median of {len(record['speedup_rounds'])} interleaved rounds, whole calls timed; range "
            f"{record['speedup_low']:.2f}-{record['speedup_high']:.2f}x); tokens {same}",
            file=sys.stderr,
        )
    return 0


def _import_modules(modules: Sequence[str]) -> None:
    import importlib

    for module in modules:
        sys.path.insert(0, ".")
        importlib.import_module(module)


def _method_args(items: Sequence[str], flag: str = "--method-arg") -> dict[str, dict[str, Any]]:
    from leap.core.options import parse_spec

    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if ":" not in item:
            raise SystemExit(f"leap: {flag} takes NAME:KEY=VALUE, got {item!r}")
        method, kwargs = parse_spec(item, separator=None, what=flag)
        out.setdefault(method, {}).update(kwargs)
    return out


def _cmd_bench(args: argparse.Namespace) -> int:
    _import_modules(args.imports)
    from leap.bench.harness import Bench, BenchSettings
    from leap.bench.methods import BenchOptions, method_names
    from leap.bench.report import summarise, table1_markdown
    from leap.data import load_prompts, pick_per_category

    if args.list_methods:
        print("\n".join(method_names()))
        return 0
    rows = pick_per_category(load_prompts(args.prompts), args.num_prompts,
                             args.categories.split(",") if args.categories else None)
    if args.first_turn_only:
        rows = [{**r, "turns": r["turns"][:1]} for r in rows]
    try:
        temps = [float(t) for t in args.temperature.split(",")]
    except ValueError:
        raise SystemExit(f"leap: --temperature takes numbers like 0 or 0,1; got {args.temperature!r}") from None
    settings = BenchSettings(
        methods=[m.strip() for m in args.methods.split(",")], temperatures=temps, max_new_tokens=args.max_new_tokens,
        runs=args.runs, warmup=args.warmup, chat=args.chat, seed=args.seed, method_args=_method_args(args.method_arg),
        options=BenchOptions(budget=args.budget, reward=args.reward, min_speedup=args.min_speedup,
                             give_up=args.give_up, draft_policy=args.draft_policy, seed=args.seed,
                             steps_per_trial=args.steps_per_trial, tree_verify=args.tree_verify))
    model = _load_for(args)
    bench = Bench(model, rows, settings, args.out, resume=args.resume, progress=not args.quiet)
    try:
        records = bench.run().records
    except KeyboardInterrupt:
        print(f"\ninterrupted; finished generations are in {bench.file.path} (continue with --resume)",
              file=sys.stderr)
        return 130
    print(table1_markdown(summarise(records)))
    print(f"records: {bench.file.path}; tables: leap report {args.out}", file=sys.stderr)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from leap.bench.records import read_records
    from leap.bench.report import plot_early_speedup, plot_speedup, summarise, table1_markdown, table2_markdown, to_csv

    from leap.bench.provenance import check_single_commit

    records = read_records(args.folder)
    commits = check_single_commit(records, mixed=args.mixed)
    rows = summarise(records)
    if not rows:
        raise SystemExit(f"leap: {args.folder} holds no finished generations")
    if args.format == "csv":
        print(to_csv(rows), end="")
    else:
        meta = next((r for r in records if r.get("kind") == "meta"), {})
        machine = meta.get("machine", {})
        prov = meta.get("provenance", {})
        print(f"model {meta.get('model', '?')}; {machine.get('device', '?')} {machine.get('dtype', '')}, "
              f"{machine.get('torch_threads', '?')} threads, {machine.get('processor', '')} ({machine.get('platform', '')}); "
              f"commit {', '.join(commits)}; torch {prov.get('torch', '?')}, transformers "
              f"{prov.get('transformers', '?')}; {prov.get('date', meta.get('time', '?'))}\n")
        print("Table 1\n")
        print(table1_markdown(rows))
        print("Table 2 (ablations)\n")
        print(table2_markdown(rows))
    if args.plot:
        folder = Path(args.folder)
        folder = folder if folder.is_dir() else folder.parent
        paths = plot_speedup(rows, folder)
        early = plot_early_speedup([r for r in records if r.get("kind") == "answer"], folder)
        print("wrote " + ", ".join(str(p) for p in [*paths, early] if p), file=sys.stderr)
    return 0


def _cmd_smoke(args: argparse.Namespace) -> int:
    from leap.bench.smoke import SmokeSettings, run_smoke

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    settings = SmokeSettings(preset=args.preset, device=args.device, dtype=args.dtype,
                             overrides=_kv_args(args.overrides), prompt_tokens=args.prompt_tokens,
                             max_new_tokens=args.max_new_tokens, budget=args.budget)
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
    for name, div in report["divergence"].items():
        print(f"  {name} diverges at token {div.get('position')}: top-2 logit margin {div.get('margin')}")
    if "verify_curve" in report:
        print("  c(k): " + ", ".join(f"{k}: {v:.2f}" for k, v in report["verify_curve"].items()))
        print("  draft cost by skipped layers: " + ", ".join(f"{k}: {v:.2f}" for k, v in report["draft_cost"].items()))
    print(f"  identical: {report['identical']}; identity rate {report['identity_rate']}; "
          f"peak memory {report['peak_memory_gib']:.2f} GiB")
    return 0 if report["ok"] else 1


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from leap.core.calibration import calibration_for

    model = _load_for(args)
    costs = calibration_for(model, refresh=args.refresh)
    if args.json:
        print(json.dumps(costs.to_dict()))
        return 0
    print(f"{model.name} on {costs.key['device']} ({costs.key['dtype']}, {costs.key['threads']} threads): "
          f"one-token step {costs.step_s * 1000:.2f} ms")
    print("verification c(k) = forward over k tokens / one token: "
          + ", ".join(f"{k}: {v:.2f}" for k, v in costs.verify_curve.items()))
    print(f"draft: {costs.layer_cost:.4f} per layer pass, {costs.head_cost:.4f} per token beyond layers "
          "(embedding, norm, LM head, overhead); one-token draft forward by executed layers: "
          + ", ".join(f"{n}: {v:.2f}" for n, v in costs.draft_curve.items()))
    print("model-free drafters' overhead per step: "
          + ", ".join(f"{n}: {v:.4f}" for n, v in costs.drafter_overhead.items()))
    return 0


def _list_registry(registry) -> int:
    """One line per registered name: the name and the first line of its docstring."""
    for name in registry.names():
        doc = (registry.get(name).__doc__ or "").strip().splitlines()
        print(f"{name:20s} {doc[0] if doc else ''}")
    return 0


def _cmd_policies(args: argparse.Namespace) -> int:
    from leap.core.policies import draft_policies

    return _list_registry(draft_policies)


def _cmd_metrics(args: argparse.Namespace) -> int:
    from leap.redundancy.base import redundancy_metrics

    return _list_registry(redundancy_metrics)


def _cmd_drafters(args: argparse.Namespace) -> int:
    from leap.core.drafters import drafters

    return _list_registry(drafters)


def _cmd_agents(args: argparse.Namespace) -> int:
    from leap.search.base import search_agents

    return _list_registry(search_agents)


def _load_for(args: argparse.Namespace):
    import torch

    from leap.core import load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    return load_model(args.model, device=args.device, dtype=args.dtype, fast_linear=False if args.no_fast_linear else None)


def _cmd_redundancy(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tqdm import tqdm

    from leap.data import load_prompts, pick_per_category
    from leap.redundancy.analysis import analyse, observation1
    from leap.redundancy.zones import ZoneSettings

    _import_modules(args.imports)
    from leap.redundancy.base import redundancy_metrics

    for role in (args.zone_metric, args.group_metric):
        redundancy_metrics.get(role)  # an unknown name fails here, listing the registered metrics
    model = _load_for(args)
    rows = pick_per_category(load_prompts(args.prompts), args.per_category,
                             args.categories.split(",") if args.categories else None)
    if not rows:
        raise SystemExit("leap: no prompts selected; check --prompts / --categories")
    settings = ZoneSettings(r_percentile=args.r_percentile, ear_percentile=args.ear_percentile)
    with tqdm(total=len(rows), desc="prefill metrics", disable=args.json) as bar:
        report = analyse(model, rows, positions=args.positions, settings=settings, zones=not args.no_zones,
                         groups=not args.no_groups, chat=args.chat, progress=lambda c: bar.update(1),
                         zone_metric=args.zone_metric, group_metric=args.group_metric,
                         metric_args=_method_args(args.metric_arg, "--metric-arg"))
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from leap.core.errors import LeapError

    commands = {"generate": _cmd_generate, "policies": _cmd_policies, "metrics": _cmd_metrics,
                "redundancy": _cmd_redundancy, "agents": _cmd_agents,
                "drafters": _cmd_drafters, "bench": _cmd_bench, "report": _cmd_report, "smoke": _cmd_smoke,
                "calibrate": _cmd_calibrate}
    try:
        return commands[args.command](args)
    except LeapError as err:
        print(f"leap: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
