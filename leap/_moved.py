"""Old import paths, kept working for one release (until leap 0.2) - the one list of what moved.

Issue 18 split ``leap/core`` into sub-packages. Every module that moved is listed in :data:`MOVED`;
importing it by its old name gives a module whose attributes are the new module's (the very same
objects, so ``isinstance`` and registries are unaffected) and raises a :class:`DeprecationWarning`
that names the new path. Nothing else in leap imports an old path (``tests/test_layout.py`` checks
both). Installed by ``leap/__init__.py``; to be removed in leap 0.2.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from typing import Any

__all__ = ["MOVED", "REMOVED_NAMES", "install"]

#: old module path -> new module path
MOVED: dict[str, str] = {
    "leap.core.model": "leap.core.modeling.model",
    "leap.core.kv_cache": "leap.core.modeling.kv_cache",
    "leap.core.fast_linear": "leap.core.modeling.fast_linear",
    "leap.core.layers": "leap.core.modeling.layers",
    "leap.core.trace": "leap.core.modeling.trace",
    "leap.core.probe": "leap.core.modeling.probe",
    "leap.core.draft_head": "leap.core.modeling.draft_head",
    "leap.core.device": "leap.core.runtime.device",
    "leap.core.host_transfers": "leap.core.runtime.host_transfers",
    "leap.core.calibration": "leap.core.decoding.calibrate",
    "leap.core.decoder": "leap.core.decoding.decoder",
    "leap.core.outcome": "leap.core.decoding.outcome",
    "leap.core.sampling": "leap.core.verify.sampling",
    "leap.core.tree_rules": "leap.core.verify.tree_rules",
    "leap.core.traversal": "leap.core.verify.traversal",
    "leap.core.draft_tree": "leap.core.trees.draft_tree",
    "leap.core.opt_tree": "leap.core.trees.opt_tree",
    "leap.core.stochastic_tree": "leap.core.trees.stochastic_tree",
    "leap.core.policy_bandit": "leap.core.policies.bandit",
    "leap.search.methods": "leap.search.factory",
    "leap.bench.provenance": "leap.core.runtime.provenance",
    "leap.search.mcts": "leap.search.agents.mcts",
    "leap.search.ucb": "leap.search.agents.ucb",
    "leap.search.bayes": "leap.search.agents.bayes",
    "leap.search.gp": "leap.search.agents.gp",
    "leap.search.random_agent": "leap.search.agents.random_agent",
    "leap.search.swift": "leap.search.agents.swift",
    "leap.search.clasp": "leap.search.agents.clasp",
    "leap.search.zone_rule": "leap.search.agents.zone_rule",
    "leap.redundancy.residual_ratio": "leap.redundancy.metrics.residual_ratio",
    "leap.redundancy.ear_gain": "leap.redundancy.metrics.ear_gain",
    "leap.redundancy.cosine": "leap.redundancy.metrics.cosine",
    "leap.redundancy.attention_entropy": "leap.redundancy.metrics.attention_entropy",
}


def _persistent_agents() -> set[str]:
    """``leap.search.methods.PERSISTENT_AGENTS`` of old: now each agent declares ``persistent`` itself."""
    from leap.search.base import search_agents

    return {name for name in search_agents.names() if search_agents.get(name).persistent}


#: names an old module had that its new one dropped: old module -> {name: a function giving the value}
REMOVED_NAMES: dict[str, dict[str, Any]] = {
    "leap.search.methods": {"PERSISTENT_AGENTS": _persistent_agents},
}


class _Alias(types.ModuleType):
    """The old module: every attribute is read from the new one."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(old, f"Moved to {new}; this alias is removed in leap 0.2.")
        self.__moved_to__ = new

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        dropped = REMOVED_NAMES.get(self.__name__, {})
        if name in dropped:
            return dropped[name]()
        return getattr(importlib.import_module(self.__moved_to__), name)

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(self.__moved_to__))


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec) -> types.ModuleType:
        return _Alias(spec.name, MOVED[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        warnings.warn(f"{module.__name__} moved to {MOVED[module.__name__]}; the old path works until leap 0.2 "
                      "(see leap/_moved.py)", DeprecationWarning, stacklevel=2)


def install() -> None:
    """Put the alias finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
