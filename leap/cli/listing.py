"""``leap policies | metrics | agents | drafters``: list a registry, one line per registered name (``--import``
loads a plug-in module first); ``leap check --import MODULE``: run the plug-in contracts
(:mod:`leap.testing.contracts`) on what that module registered."""

from __future__ import annotations

import argparse

NAMES = ("policies", "metrics", "agents", "drafters", "check")


def add_parser(sub) -> None:
    from leap.cli.common import add_import_arg

    for name, what in (("policies", "draft-length policies"), ("metrics", "redundancy metrics"),
                       ("agents", "search agents"), ("drafters", "drafters")):
        add_import_arg(sub.add_parser(name, help=f"list the registered {what}"), what.split()[-1])
    c = sub.add_parser("check", help="run the plug-in contracts on the agents, metrics and drafters a module "
                                     "registers (leap check --import my_agents)")
    add_import_arg(c, "agent, metric or drafter")
    c.add_argument("--all", action="store_true", help="check every registered plug-in, leap's own included")


def _list_registry(registry) -> int:
    """One line per registered name: the name and the first line of its docstring."""
    for name in registry.names():
        doc = (registry.get(name).__doc__ or "").strip().splitlines()
        print(f"{name:20s} {doc[0] if doc else ''}")
    return 0


def _policies() -> int:
    from leap.core.policies.base import draft_policies

    return _list_registry(draft_policies)


def _metrics() -> int:
    from leap.redundancy.base import redundancy_metrics

    return _list_registry(redundancy_metrics)


def _drafters() -> int:
    from leap.core.drafters import drafters

    return _list_registry(drafters)


def _agents() -> int:
    from leap.search.base import search_agents

    return _list_registry(search_agents)


def _check(args: argparse.Namespace) -> int:
    """Contracts on what the --import modules registered (or everything with --all); one line per failure."""
    from leap.testing import contracts
    from leap.cli.common import import_modules
    from leap.core.drafters import drafters
    from leap.redundancy.base import redundancy_metrics
    from leap.search.base import search_agents

    registries = {"agent": search_agents, "metric": redundancy_metrics, "drafter": drafters}
    before = {kind: set(reg.names()) for kind, reg in registries.items()}
    import_modules(args.imports)
    todo = [(kind, name) for kind, reg in registries.items() for name in reg.names()
            if args.all or name not in before[kind]]
    if not todo:
        print("leap check: nothing to check - give --import MODULE (a module that registers plug-ins) or --all")
        return 2
    model = contracts.contract_model() if any(kind != "agent" for kind, _ in todo) else None
    failures = 0
    for kind, name in todo:
        found = (contracts.check_agent(name) if kind == "agent" else contracts.check_metric(name, model)
                 if kind == "metric" else contracts.check_drafter(name, model))
        print(f"[{'FAIL' if found else '  ok'}] {kind} {name}")
        for line in found:
            print(f"       {line}")
        failures += bool(found)
    print(f"leap check: {len(todo) - failures} passed, {failures} failed")
    return 1 if failures else 0


def run(args: argparse.Namespace) -> int:
    if args.command == "check":
        return _check(args)
    from leap.cli.common import import_modules

    import_modules(getattr(args, "imports", []))
    return {"policies": _policies, "metrics": _metrics, "agents": _agents, "drafters": _drafters}[args.command]()
