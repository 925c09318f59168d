"""``leap policies | metrics | agents | drafters``: list a registry, one line per registered name."""

from __future__ import annotations

import argparse

NAMES = ("policies", "metrics", "agents", "drafters")


def add_parser(sub) -> None:
    sub.add_parser("policies", help="list the registered draft-length policies")
    sub.add_parser("metrics", help="list the registered redundancy metrics")
    sub.add_parser("agents", help="list the registered search agents")
    sub.add_parser("drafters", help="list the registered model-free drafters")


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


def run(args: argparse.Namespace) -> int:
    return {"policies": _policies, "metrics": _metrics, "agents": _agents, "drafters": _drafters}[args.command]()
