"""The search-agent API: ask/tell, in the style of Optuna's samplers.

Lifecycle (who calls what, driven by :class:`leap.search.runner.OnlineSearch`, the Gymnasium
environment or a benchmark loop):

1. ``agent = make_agent("mcts", space, seed=0)`` - the agent gets the
   :class:`~leap.redundancy.space.SearchSpace` (zones, groups, allowed actions) and a seed; it never
   touches global random state (``self.rng`` is its own ``numpy.random.Generator``).
2. ``agent.on_prompt(probe)`` - a new prompt starts; ``probe`` is a :class:`~leap.core.modeling.probe.Probe`
   (the runner passes a :class:`~leap.core.modeling.probe.ContextProbe`; None in model-free loops) for agents
   that score configurations on the context (SWIFT, CLaSP): ``committed``, ``matchness``,
   ``target_states``, ``run_layer`` - never the decoder's internals. Default: nothing.
3. loop: ``config = agent.ask(history)`` -> a :class:`~leap.core.config.LayerConfig` inside the space,
   or ``None`` for a plain decoding step; the runner runs one real draft/verify step under it,
   appends ``(config, reward)`` to the read-only :class:`~leap.search.history.SearchHistory`, then
   calls ``agent.record(config, reward, history)``, which keeps the base class's convergence
   bookkeeping and then calls the agent's own ``tell`` - so an agent that overrides ``tell`` (with
   or without ``super()``) still converges. A loop of your own may call ``tell`` directly (Optuna
   style): :meth:`SearchAgent.converged` catches up on trials ``record`` did not see.
4. ``agent.converged(history)`` -> stop searching; ``agent.best(history)`` -> the configuration to
   fix for the rest of the prompt, which must be one the history holds, or None (the runner raises a
   :class:`~leap.core.errors.SettingsError` naming the agent otherwise, and falls back to plain
   decoding when the best one does not pay).

Class attributes an agent declares: ``persistent`` (False: a new agent per prompt, on that prompt's
space; True: one agent for the whole stream of prompts, as SWIFT and CLaSP search once over the data
stream) and :meth:`SearchAgent.space_for` (the space it searches: LEAP's zones and groups from the
prompt's prefill by default; SWIFT and CLaSP use every layer but the first and last).

Only :meth:`SearchAgent.ask` is required. A complete agent::

    @search_agents.register("random-skip")
    class RandomSkipAgent(SearchAgent):
        \"\"\"Skip each skippable unit independently with probability ``p``.\"\"\"

        def __init__(self, space, *, p=0.3, seed=None):
            super().__init__(space, seed=seed)
            self.p = p

        def ask(self, history):
            choice = [1 if len(u.actions) > 1 and self.rng.random() < self.p else 0 for u in self.space.units]
            return self.space.to_config(choice) if self.space.is_valid(choice) else None

Register with ``@search_agents.register("name")``; third-party agents come through the entry-point
group ``leap.search_agents``. Every registered agent runs the contract tests in
``tests/search/test_agent_contract.py`` automatically.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leap.core.config import LayerConfig
from leap.core.registry import Registry
from leap.core.modeling.probe import Probe
from leap.redundancy.space import SearchSpace
from leap.search.history import SearchHistory

__all__ = ["SearchAgent", "search_agents", "make_agent"]


class SearchAgent:
    """Base class; see the module docstring for the lifecycle. A complete agent (run as a doctest)::

        >>> from leap.search import SearchAgent, search_agents
        >>> @search_agents.register("doc-random-skip")
        ... class RandomSkipAgent(SearchAgent):
        ...     "Each decision unit takes a random allowed action."
        ...     def ask(self, history):
        ...         choice = [int(self.rng.integers(len(unit.actions))) for unit in self.space.units]
        ...         return self.space.to_config(choice) if self.space.is_valid(choice) else None
        >>> from leap.testing import check_agent
        >>> check_agent("doc-random-skip")  # the contract leap check runs: no problem found
        []
        >>> search_agents.remove("doc-random-skip")

    Args:
        space: the search space proposals must come from.
        seed: seed of the agent's own generator (None: fresh entropy).
        patience: :meth:`converged` once the best configuration is unchanged for this many tells.
        min_iterations: never converge before this many trials.
    """

    name = "base"
    persistent = False  # True: one agent across prompts (its state carries over); see the module docstring
    #: whether its proposals depend on its seed (the contract tests check that different seeds differ, so a seed
    #: argument that does nothing - issue 33's optuna-qmc - is caught); False for deterministic rules
    seeded = True
    #: whether a trial the runner chose itself may be recorded (``tell`` with a configuration it did not ask for):
    #: ``SearchSettings.favourite_first`` runs the memory's favourite first, and the options it remembers above the
    #: leader next, only for such agents
    accepts_foreign_trials = False

    @classmethod
    def space_for(cls, trace: Any, num_layers: int, *, zones: bool = True, groups: bool = True,
                  **space_kwargs: Any) -> SearchSpace:
        """The space this agent searches for a prompt with prefill ``trace`` (LEAP's by default;
        ``space_kwargs``: ``zone_metric``, ``group_metric``, ``metric_args`` of
        :func:`leap.redundancy.build.build_space`)."""
        from leap.redundancy.build import build_space

        if trace is None:
            from leap.core.errors import SettingsError

            raise SettingsError(f"{cls.name}: LEAP's search space needs a prefill trace; the prompt must have 2+ tokens")
        return build_space(trace, zones=zones, groups=groups, **space_kwargs)

    def __init__(self, space: SearchSpace, *, seed: int | None = None, patience: int = 6,
                 min_iterations: int = 8) -> None:
        self.space = space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.patience = int(patience)
        self.min_iterations = int(min_iterations)
        self._best_seen: LayerConfig | None | object = object()
        self._unchanged = 0
        self._seen = 0  # trials of the history the bookkeeping has seen

    # ------------------------------------------------------------------ required
    def ask(self, history: SearchHistory) -> LayerConfig | None:
        """The next configuration to measure (inside :attr:`space`), or None for a plain step."""
        raise NotImplementedError

    # ------------------------------------------------------------------ optional
    def tell(self, config: LayerConfig | None, reward: float, history: SearchHistory) -> None:
        """Feedback for a configuration :meth:`ask` proposed; ``history`` already holds it (default: nothing)."""

    # ------------------------------------------------------------------ called by the runner, not overridden
    def record(self, config: LayerConfig | None, reward: float, history: SearchHistory) -> None:
        """What the runner calls after each trial: the convergence bookkeeping, then :meth:`tell`."""
        self._bookkeep(history)
        self.tell(config, reward, history)

    def _bookkeep(self, history: SearchHistory) -> None:
        """Count the trials the best configuration has stayed the best (once per new trial)."""
        if len(history) <= self._seen:
            return
        self._seen = len(history)
        best = history.best()
        key = best[0] if best else None
        if key == self._best_seen:
            self._unchanged += 1
        else:
            self._best_seen, self._unchanged = key, 0

    def on_prompt(self, probe: Probe | None) -> None:
        """A new prompt starts; ``probe`` scores configurations on its context (may be None)."""

    def converged(self, history: SearchHistory) -> bool:
        """Whether to stop searching. Works in a loop of your own that calls only ``ask``/``tell``: trials
        that did not pass through :meth:`record` are counted here."""
        self._bookkeep(history)
        return len(history) >= self.min_iterations and self._unchanged >= self.patience

    def best(self, history: SearchHistory) -> LayerConfig | None:
        """The configuration to fix once the search stops (default: highest mean reward)."""
        best = history.best()
        return best[0] if best else None

    def reseed(self, seed: int | None) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume; subclasses extend it."""
        return {"rng": self.rng.bit_generator.state, "unchanged": self._unchanged,
                "best_seen": _encode(self._best_seen)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self._unchanged = state["unchanged"]
        self._best_seen = _decode(state["best_seen"])


def _encode(value: Any) -> Any:
    if isinstance(value, LayerConfig):
        return str(value)
    return None if value is None else "<unset>"


def _decode(value: Any) -> Any:
    if value == "<unset>":
        return object()
    return None if value is None else LayerConfig.parse(value)


search_agents: Registry[type[SearchAgent]] = Registry(
    "search agent",
    "leap.search_agents",
    builtin_modules=(
        "leap.search.agents.random_agent",
        "leap.search.agents.mcts",
        "leap.search.agents.ucb",
        "leap.search.agents.bayes",
        "leap.search.agents.swift",
        "leap.search.agents.clasp",
        "leap.search.agents.zone_rule",
        "leap.search.external.optuna_agent",
        "leap.search.external.nevergrad_agent",
    ),
)


def make_agent(name: str, space: SearchSpace, **kwargs: Any) -> SearchAgent:
    """An agent by registered name (``kwargs`` go to its constructor)."""
    return search_agents.create(name, space, **kwargs)
