"""Helpers every ``leap`` command shares: model arguments, key=value options, plug-in imports, loading."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["kv_args", "method_args", "add_model_args", "add_metric_args", "add_import_arg", "import_modules",
           "load_for", "add_search_args", "config_from_args"]


def kv_args(items: Sequence[str], what: str = "--policy-arg / --agent-arg / --drafter-arg") -> dict[str, Any]:
    from leap.core.options import parse_assignments

    return parse_assignments(items, what)


def method_args(items: Sequence[str], flag: str = "--method-arg") -> dict[str, dict[str, Any]]:
    """``NAME:KEY=VALUE`` items grouped by NAME."""
    from leap.core.options import parse_spec

    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if ":" not in item:
            raise SystemExit(f"leap: {flag} takes NAME:KEY=VALUE, got {item!r}")
        method, kwargs = parse_spec(item, separator=None, what=flag)
        out.setdefault(method, {}).update(kwargs)
    return out


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="smollm2", help="smollm2 (default), a .gguf file, a model folder or a hub id")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:1 ...")
    p.add_argument("--dtype", default=None, help="float32 (CPU default), bfloat16 (GPU default), float16")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--graphs", choices=("auto", "off"), default="auto",
                   help="auto: on CUDA every layer a CUDA-graph replay over a static cache; off: eager layers (the "
                        "ablation; the CPU is always eager)")
    p.add_argument("--linears", choices=("auto", "packed", "stock"), default="auto",
                   help="float32 CPU linears: auto (oneDNN-packed where measured faster on this machine, once, "
                        "cached), packed (always), stock (torch's own)")
    p.add_argument("--no-fast-linear", action="store_true", help="the same as --linears stock")


def fast_linear_of(args: argparse.Namespace) -> bool | None:
    """``load_model``'s ``fast_linear`` for ``--linears`` (and ``--no-fast-linear``)."""
    way = "stock" if getattr(args, "no_fast_linear", False) else getattr(args, "linears", "auto")
    return {"auto": None, "packed": True, "stock": False}[way]


def add_metric_args(p: argparse.ArgumentParser) -> None:
    """Which registered metrics fill LEAP's two roles (leap.redundancy.build), and their arguments."""
    p.add_argument("--zone-metric", default="residual-ratio",
                   help="the metric in LEAP's R role (early zone), any of `leap metrics` (default residual-ratio)")
    p.add_argument("--group-metric", default="ear-gain",
                   help="the metric in LEAP's Delta L role (final zone, group cuts; default ear-gain)")
    p.add_argument("--metric-arg", action="append", default=[], metavar="NAME:KEY=VALUE",
                   help="constructor argument of one metric, e.g. test-layer-index:scale=2 (repeatable)")


def add_import_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help=f"import a module first (one that registers your own {what})")


def import_modules(modules: Sequence[str]) -> None:
    """Import plug-in modules named by ``--import`` (the working directory is on the path)."""
    import importlib

    from leap.core.runtime.provenance import record_plugin

    from leap.core.errors import LeapError

    importlib.invalidate_caches()  # a plug-in written since the last import is found
    for module in modules:
        sys.path.insert(0, ".")
        try:
            imported = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name and (module == err.name or module.startswith(err.name + ".")):
                raise LeapError(f"--import {module}: no module of that name on the path (the working directory is "
                                "on it); check the spelling, run from the folder that holds it, or pip install it") \
                    from None
            raise LeapError(f"--import {module}: it imports {err.name!r}, which is not installed; install it "
                            "or fix the plug-in's import") from None
        record_plugin(imported)  # records name the plug-ins that made them


def load_for(args: argparse.Namespace):
    import torch

    from leap.core import load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    if getattr(args, "graphs", "auto") == "off":
        os.environ["LEAP_GRAPHS"] = "0"  # read by leap.core.modeling.layers.default_engine
    return load_model(args.model, device=args.device, dtype=args.dtype, fast_linear=fast_linear_of(args))


def add_search_args(p: argparse.ArgumentParser) -> None:
    """A search method's settings (LEAP's ablations, metrics, budget, reward, fallback, agent, drafters)."""
    p.add_argument("--no-zones", action="store_true", help="ablation: every layer middle-like (EXECUTE/SKIP)")
    p.add_argument("--no-groups", action="store_true", help="ablation: one decision unit per layer")
    p.add_argument("--no-search", action="store_true", help="ablation: zones + groups with a fixed rule (no MCTS)")
    p.add_argument("--low-bit-layers", action="store_true",
                   help="extension: middle and final layers may also run at low precision in the draft (LOW, 'Q')")
    p.add_argument("--low-bits", type=int, choices=[8, 4], default=8,
                   help="precision of LOW layers: 8 (weight-only int8, default) or 4 (int4, groups of 32)")
    add_metric_args(p)
    p.add_argument("--budget", type=int, default=40, help="search iterations per prompt (default 40)")
    p.add_argument("--reward", choices=["measured", "cost"], default="measured",
                   help="measured speedup (default) or the deterministic cost model")
    p.add_argument("--min-speedup", type=float, default=1.0,
                   help="fall back to plain decoding unless the best configuration's mean reward reaches this")
    p.add_argument("--give-up", type=int, default=10,
                   help="stop searching after N iterations if no step reached --min-speedup (0 = never)")
    p.add_argument("--loss-budget", type=float, default=0.03,
                   help="the most the search may lose before a configuration pays, as a fraction of the request's plain-decoding time (default 0.03; 0 = no limit)")
    p.add_argument("--steps-per-trial", type=int, default=1,
                   help="real steps per search iteration, rewarded together (default 1, LEAP's)")
    p.add_argument("--carry-over", type=int, default=0,
                   help="reuse a choice that paid for up to N following prompts without searching (default 0)")
    p.add_argument("--agent-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="agent constructor argument (JSON values), e.g. ratio_band=[0.75,0.95] (repeatable)")
    p.add_argument("--drafters", default=None, metavar="OPTIONS",
                   help="search over drafters jointly with the layers: 'default' or ';'-separated options, e.g. "
                        "'layer-skip;prompt-lookup:num_tokens=4;suffix;token-recycling;hybrid'")
    p.add_argument("--no-drafter-settings", action="store_true",
                   help="ablation: search each drafter at its defaults only (not over its declared settings, "
                        "e.g. lowbit's num_tokens)")
    p.add_argument("--no-memory", action="store_true",
                   help="ablation: no memory of earlier requests (by default a search over drafters prunes the "
                        "options earlier requests found losing: $LEAP_CACHE/search_memory)")
    p.add_argument("--no-prior", action="store_true",
                   help="ablation: a search memory that is still empty starts empty, not from the prior leap ships "
                        "for the model (leap/data/search_memory)")
    p.add_argument("--favourite-first", action=argparse.BooleanOptionalAction, default=True,
                   help="the search's first trial is the memory's favourite option (not its agent's own draw), and it "
                        "settles when that trial confirms what the memory expected of it; while untried options "
                        "this machine measured hold the request, the best of them is the next trial "
                        "(docs/search.md; the default; --no-favourite-first: the agent draws every trial)")
    p.add_argument("--abandon", type=float, default=0.5, metavar="F",
                   help="a trial whose first half measured below F times the best other configuration's mean reward "
                        "on this request stops there (default 0.5; 0: every trial runs whole, the ablation)")
    p.add_argument("--explore", type=int, default=4, metavar="N",
                   help="with a memory, a request that has tried N options stops waiting for those the memory does "
                        "not know yet, which wait for later requests (default 4; 0: each holds the search, the "
                        "ablation)")
    p.add_argument("--kin", action=argparse.BooleanOptionalAction, default=True,
                   help="a favourite that falls short of the shipped prior's mean for it (another machine's) says how "
                        "fast this machine runs its draft model: the options drafting with that model are expected "
                        "at the same shortfall (docs/search.md; the default; --no-kin: the ablation)")
    p.add_argument("--steady", action=argparse.BooleanOptionalAction, default=True,
                   help="a trial starts a drafter that ramps up over a request (lowbit's adaptive chain) at the pace "
                        "it ramps up to (the default; --no-steady: at the ramp's start, the ablation)")


def config_from_args(args: argparse.Namespace, num_layers: int):
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
