"""The shipped prior a search memory starts from, and the scale it takes on this machine.

A :class:`~leap.search.memory.SearchMemory` still empty starts from the prior leap ships for the model
(``leap/data/search_memory/<model>.json``, made by ``benchmarks/search_prior.sh`` on leap's seed prompts, never
Spec-Bench) where its device type and dtype match (:func:`leap.search.memory.store.memory_for`): the first request
prunes and screens with it instead of trying every option (``docs/data/search_two_trials``). Each option counts as
seen on ``min_requests`` requests at most (:func:`prior_sets`), so this machine's requests outweigh it after a few
(:meth:`~leap.search.memory.SearchMemory.learnt_elsewhere`: what this machine never measured); once it has measured
options the floor is theirs (``docs/data/regret-xeon-186fde1/long-t0``).

The prior's ranking travels, its scale does not: on Spec-Bench's long prompts every option ran at 0.33 to 0.93 of the
long set's means, and a second request opened with the untried ``prompt-lookup`` the prior rated and spent its loss
budget (``docs/data/regret-xeon-1a91eb4/long-t0``). So the first request a set measures here scales all its prior
means by the median ratio of what it measured to what the prior said (:func:`rescale`; the memory's
``rescale=False`` is the ablation: ``experiments/2026-12-02-prior-scale``).

Who calls what: :meth:`SearchMemory.start_from_prior <leap.search.memory.SearchMemory.start_from_prior>` reads a prior
with :func:`prior_sets`; :meth:`SearchMemory.observe <leap.search.memory.SearchMemory.observe>` calls :func:`rescale`
before it learns a request.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["prior_sets", "rescale"]


def prior_sets(data: dict[str, Any], fields: Iterable[tuple[str, str]],
               min_requests: int) -> dict[str, dict[str, dict[str, Any]]]:
    """A shipped prior's sets of means (``data``, the prior file read as JSON; ``fields``: each set's key and the
    field the file keeps it under), each entry counted on ``min_requests`` requests at most and marked as measured
    elsewhere ("last" and "here" 0)."""
    return {key: {label: {"requests": min(int(entry["requests"]), min_requests), "mean": float(entry["mean"]),
                          "var": float(entry.get("var", 0.0)), "last": 0, "here": 0,
                          "fingerprint": entry.get("fingerprint")}
                  for label, entry in data.get(field, {}).items()}
            for key, field in fields}


def rescale(means: dict[str, dict[str, Any]], values: dict[str, float],
            learnt_elsewhere: Callable[[str], bool]) -> float | None:
    """Where every entry of ``means`` (one set: label -> entry) is the prior's alone (``learnt_elsewhere``), scale
    them all, in place, by the median ratio of what this request measured (``values``, label -> speedup) to the
    prior's means for the same options; the scale, or None where nothing was scaled (module docstring)."""
    ratios = [v / means[k]["mean"] for k, v in values.items() if k in means and means[k]["mean"] > 0]
    if not ratios or not all(learnt_elsewhere(label) for label in means):
        return None
    scale = float(statistics.median(ratios))
    for entry in means.values():
        entry["mean"], entry["var"] = entry["mean"] * scale, entry.get("var", 0.0) * scale ** 2
    return scale
