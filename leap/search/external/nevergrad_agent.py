"""Nevergrad's optimizers as search agents: ``nevergrad-ngopt``, ``nevergrad-de``, ``nevergrad-portfolio`` and
``nevergrad`` (any optimizer of ``nevergrad.optimizers.registry`` by name: ``--agent-arg optimizer=TBPSA``).

Nevergrad (Rapin and Teytaud, 2018; Meta's gradient-free optimisation platform) is the other toolbox the
field runs black-box searches with; NGOpt is its algorithm-selection wizard, which picks an optimizer
from the parametrisation and the budget. The adapter drives Nevergrad's own ask-and-tell interface
(``optimizer.ask()`` / ``optimizer.tell(candidate, loss)``): each decision unit of the
:class:`~leap.redundancy.space.SearchSpace` with more than one allowed action is one ``ng.p.Choice`` over
the action indices (a :class:`~leap.search.drafter_space.JointSpace`'s drafter option is one more); the
loss is the negated reward (Nevergrad minimises). The zone rule's configuration (LEAP's starting point) is
``suggest``-ed as the first candidate. A proposal the space forbids is told a loss worse than any
speedup and asked again.

Optional: ``pip install leap[nevergrad]``. Without Nevergrad these names are not registered, so
``leap agents`` lists them only when it is installed, and the registry-wide agent contract tests cover
them whenever it is.

Determinism and resuming: the parametrisation's random state is seeded from the agent's seed, so the same
seed gives the same proposals; :meth:`state_dict` keeps the seed and every ask/tell in order, and
:meth:`load_state_dict` replays them into a fresh optimizer (Nevergrad's optimizers are deterministic
given their random state and history), which resumes the search exactly.

Who calls what: registered in :data:`leap.search.base.search_agents`; the runner calls ``ask`` and
``record`` as for every agent. Per prompt (``persistent = False``), with ``budget`` trials planned
(NGOpt sizes its choice by it).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from leap.core.errors import SettingsError
from leap.redundancy.space import SearchSpace
from leap.search.agents.zone_rule import zone_rule_choice
from leap.search.base import SearchAgent, search_agents
from leap.search.history import SearchHistory

__all__ = ["NevergradAgent", "AVAILABLE"]

AVAILABLE = importlib.util.find_spec("nevergrad") is not None
FORBIDDEN_LOSS = 1e6  # told for a proposal the space forbids (every real loss is minus a speedup)


def _nevergrad():
    try:
        import nevergrad as ng
    except ImportError as err:
        raise SettingsError("the nevergrad agents need Nevergrad: pip install leap[nevergrad]") from err
    return ng


class NevergradAgent(SearchAgent):
    """Any Nevergrad optimizer by name (``optimizer``, default NGOpt) over the space's decision units.

    ``optimizer``: a name in ``nevergrad.optimizers.registry``; ``budget``: the trials it plans for."""

    name = "nevergrad"
    optimizer_name = "NGOpt"

    def __init__(self, space: SearchSpace, *, seed: int | None = None, optimizer: str | None = None,
                 budget: int = 40, seed_with_zone_rule: bool = True, **kwargs: Any) -> None:
        super().__init__(space, seed=seed, **kwargs)
        ng = _nevergrad()
        self.optimizer_name = optimizer or self.optimizer_name
        if self.optimizer_name not in ng.optimizers.registry:
            raise SettingsError(f"nevergrad has no optimizer {self.optimizer_name!r}; see "
                                "nevergrad.optimizers.registry (e.g. NGOpt, DE, TwoPointsDE, PortfolioDiscreteOnePlusOne)")
        self.budget = int(budget)
        self.seed_with_zone_rule = seed_with_zone_rule
        self._dims = [i for i, n in enumerate(space.action_counts) if n > 1]
        self._start(self.seed)

    def _start(self, seed: int | None) -> None:
        """A fresh optimizer whose random state comes from ``seed``; nothing asked yet."""
        ng = _nevergrad()
        counts = self.space.action_counts
        param = ng.p.Dict(**{f"u{i}": ng.p.Choice(list(range(counts[i]))) for i in self._dims})
        param.random_state = np.random.RandomState(None if seed is None else seed % (2**32))
        self.optimizer = ng.optimizers.registry[self.optimizer_name](parametrization=param, budget=self.budget,
                                                                     num_workers=1)
        self._param_seed = seed
        self._asked: list[list[int]] = []  # every asked choice, in order
        self._events: list[list] = []  # ["ask", index] / ["tell", index, loss] in order: what load_state_dict replays
        self._open: list[tuple[Any, Any, int]] = []  # (config, candidate, log index) asked and not yet told
        if self.seed_with_zone_rule and self._dims:
            start = self._zone_rule_choice()
            self.optimizer.suggest({f"u{i}": start[i] for i in self._dims})

    def reseed(self, seed: int | None) -> None:
        super().reseed(seed)
        self._start(seed)

    def _zone_rule_choice(self) -> list[int]:
        """LEAP's starting point: skip every middle-zone unit (:func:`~leap.search.agents.zone_rule.zone_rule_choice`)."""
        return zone_rule_choice(self.space)

    # ------------------------------------------------------------------ ask / tell
    def _ask_choice(self) -> tuple[list[int], Any]:
        candidate = self.optimizer.ask()
        choice = list(self.space.full_choice)
        for i in self._dims:
            choice[i] = int(candidate.value[f"u{i}"])
        return choice, candidate

    def _record_ask(self) -> tuple[list[int], Any]:
        choice, candidate = self._ask_choice()
        self._asked.append(choice)
        self._events.append(["ask", len(self._asked) - 1])
        return choice, candidate

    def _tell(self, candidate: Any, index: int, loss: float) -> None:
        self.optimizer.tell(candidate, loss)
        self._events.append(["tell", index, loss])

    def ask(self, history: SearchHistory):
        for _ in range(32):
            choice, candidate = self._record_ask()
            if self.space.is_valid(choice):
                config = self.space.to_config(choice)
                self._open.append((config, candidate, len(self._asked) - 1))
                return config
            self._tell(candidate, len(self._asked) - 1, FORBIDDEN_LOSS)  # forbidden by the space
        return self.space.sample_config(self.rng)  # the optimizer keeps proposing forbidden points

    def tell(self, config, reward: float, history: SearchHistory) -> None:
        for k, (asked, candidate, index) in enumerate(self._open):
            if asked == config:
                del self._open[k]
                self._tell(candidate, index, -float(reward))
                return

    # ------------------------------------------------------------------ resuming
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(param_seed=self._param_seed, asked=[list(c) for c in self._asked],
                     events=[list(e) for e in self._events], open=[index for _, _, index in self._open])
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._start(state["param_seed"])
        candidates: dict[int, Any] = {}
        for event in state["events"]:  # the same asks and tells in the same order: the same optimizer state
            if event[0] == "ask":
                choice, candidates[event[1]] = self._record_ask()
                if choice != list(state["asked"][event[1]]):
                    raise SettingsError(f"{self.name}: replaying the saved search diverged (another Nevergrad "
                                        "version or optimizer?); start the search afresh")
            else:
                self._tell(candidates[event[1]], event[1], event[2])
        self._open = [(self.space.to_config(self._asked[i]), candidates[i], i) for i in state["open"]]


class NGOptAgent(NevergradAgent):
    """NGOpt: Nevergrad's wizard, which selects an optimizer for the parametrisation and budget."""

    name = "nevergrad-ngopt"
    optimizer_name = "NGOpt"


class DEAgent(NevergradAgent):
    """Differential evolution (Nevergrad's ``DE``)."""

    name = "nevergrad-de"
    optimizer_name = "DE"


class PortfolioAgent(NevergradAgent):
    """A portfolio of discrete (1+1) strategies (``PortfolioDiscreteOnePlusOne``), suited to categorical spaces."""

    name = "nevergrad-portfolio"
    optimizer_name = "PortfolioDiscreteOnePlusOne"


if AVAILABLE:  # registered only where Nevergrad is installed (an optional extra)
    for _cls in (NevergradAgent, NGOptAgent, DEAgent, PortfolioAgent):
        search_agents.add(_cls.name, _cls)
