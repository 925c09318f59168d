"""Optuna's samplers as search agents: ``optuna-tpe``, ``optuna-gp``, ``optuna-cmaes``, ``optuna-qmc`` and
``optuna`` (any sampler by name: ``--agent-arg sampler=NSGAIISampler``).

The optimizers the field already trusts, in the same harness as LEAP's MCTS: the agent drives an
:class:`optuna.study.Study` with Optuna's ask-and-tell interface (the ``Study.ask`` / ``Study.tell`` pair
its docs describe for external loops). Every decision unit of the
:class:`~leap.redundancy.space.SearchSpace` with more than one allowed action is one parameter - a
categorical over the action indices, or, for samplers that cannot search categoricals (CMA-ES falls
back to random sampling on them), an integer over the same indices (``integer=True``, the default for
``optuna-cmaes``); a :class:`~leap.search.drafter_space.JointSpace`'s drafter option is one more.
The first trial is LEAP's own starting point, the zone rule (skip every middle group), given to the
study with ``enqueue_trial``. A proposal the space forbids (every layer skipped) is told to the study as
failed and asked again.

Determinism: the sampler is rebuilt for every ask with a seed drawn from the agent's own generator
(Optuna's TPE, GP and CMA-ES samplers keep their state in the study's trials, so nothing is lost), except
QMC, whose scrambled sequence needs one seed for the whole study (the agent's). So the same seed gives
the same proposals, and :meth:`state_dict` (the trials plus the generator) resumes a search exactly.

Who calls what: registered in :data:`leap.search.base.search_agents`; the runner
(:class:`leap.search.runner.OnlineSearch`) calls ``ask`` and ``record`` like for every agent, so
``leap generate --method optuna-tpe`` and ``leap bench --methods ar,leap,optuna-tpe`` work, and the agent
contract tests cover every registered name. Per prompt, like MCTS (``persistent = False``).
"""

from __future__ import annotations

import warnings
from typing import Any

from leap.core.errors import SettingsError
from leap.redundancy.space import SearchSpace
from leap.search.agents.zone_rule import zone_rule_choice
from leap.search.base import SearchAgent, search_agents
from leap.search.history import SearchHistory

__all__ = ["OptunaAgent", "TPEAgent", "GPAgent", "CmaEsAgent", "QMCAgent"]

_FIXED_SEED = {"QMCSampler"}  # samplers whose sequence needs one seed for the whole study


def _optuna():
    try:
        import optuna
    except ImportError as err:  # a declared dependency; this names the fix if an environment lacks it
        raise SettingsError("the optuna agents need Optuna: pip install optuna") from err
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


@search_agents.register("optuna")
class OptunaAgent(SearchAgent):
    """Any Optuna sampler (``sampler``: a class name in :mod:`optuna.samplers`, ``sampler_args``: its
    keyword arguments) over the space's decision units."""

    name = "optuna"
    sampler_name = "TPESampler"
    integer = False

    def __init__(self, space: SearchSpace, *, seed: int | None = None, sampler: str | None = None,
                 sampler_args: dict[str, Any] | None = None, integer: bool | None = None,
                 seed_with_zone_rule: bool = True, **kwargs: Any) -> None:
        super().__init__(space, seed=seed, **kwargs)
        optuna = _optuna()
        self.sampler_name = sampler or self.sampler_name
        if not hasattr(optuna.samplers, self.sampler_name):
            raise SettingsError(f"optuna has no sampler {self.sampler_name!r}; see optuna.samplers (e.g. "
                                "TPESampler, GPSampler, CmaEsSampler, QMCSampler, NSGAIISampler)")
        self.sampler_args = dict(sampler_args or {})
        self.integer = self.integer if integer is None else bool(integer)
        self.seed_with_zone_rule = seed_with_zone_rule
        counts = list(space.action_counts)
        self._dims = [i for i, n in enumerate(counts) if n > 1]
        dist = (lambda n: optuna.distributions.IntDistribution(0, n - 1)) if self.integer else \
            (lambda n: optuna.distributions.CategoricalDistribution(list(range(n))))
        self.distributions = {f"u{i}": dist(counts[i]) for i in self._dims}
        self._open: list[tuple[Any, Any]] = []  # (config, trial) asked and not yet told
        self._new_study()

    # ------------------------------------------------------------------ the study
    def _sampler(self, draw: bool = True):
        optuna = _optuna()
        cls = getattr(optuna.samplers, self.sampler_name)
        seed = self.seed if self.sampler_name in _FIXED_SEED or not draw else int(self.rng.integers(2**31 - 1))
        with warnings.catch_warnings():  # GP, QMC: "experimental" in Optuna's terms; leap tests them itself
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return cls(seed=seed, **self.sampler_args)

    def _new_study(self, enqueue: bool = True) -> None:
        optuna = _optuna()
        self.study = optuna.create_study(direction="maximize", sampler=self._sampler(draw=False))
        self._open = []
        self._asks = 0
        if enqueue and self.seed_with_zone_rule and self._dims:
            start = self._zone_rule_choice()
            self.study.enqueue_trial({f"u{i}": start[i] for i in self._dims})

    def reseed(self, seed: int | None) -> None:
        super().reseed(seed)
        self._new_study()

    def _zone_rule_choice(self) -> list[int]:
        """LEAP's starting point: skip every middle-zone unit (:func:`~leap.search.agents.zone_rule.zone_rule_choice`)."""
        return zone_rule_choice(self.space)

    # ------------------------------------------------------------------ ask / tell
    def ask(self, history: SearchHistory):
        optuna = _optuna()
        for _ in range(32):
            self.study.sampler = self._sampler()
            trial = self.study.ask(self.distributions)
            self._asks += 1
            choice = list(self.space.full_choice)
            for i in self._dims:
                choice[i] = int(trial.params[f"u{i}"])
            if self.space.is_valid(choice):
                config = self.space.to_config(choice)
                self._open.append((config, trial))
                return config
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)  # forbidden by the space
        return self.space.sample_config(self.rng)  # the sampler keeps proposing forbidden points

    def tell(self, config, reward: float, history: SearchHistory) -> None:
        for k, (asked, trial) in enumerate(self._open):
            if asked == config:
                del self._open[k]
                self.study.tell(trial, float(reward))
                return

    # ------------------------------------------------------------------ resuming
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["asks"] = self._asks
        state["sampler_seed"] = self.seed  # a fixed-seed sampler (scrambled QMC) resumes its own sequence
        storage, sid = self.study._storage, self.study._study_id
        state["study_attrs"] = dict(storage.get_study_system_attrs(sid))  # e.g. QMC's position in its sequence
        state["trials"] = [
            {"params": dict(t.params), "value": t.value, "state": t.state.name, "system_attrs": dict(t.system_attrs),
             "distributions": {k: d.__class__.__name__ for k, d in t.distributions.items()}}
            for t in self.study.get_trials(deepcopy=False) if t.state.is_finished()
        ]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        optuna = _optuna()
        if self.sampler_name in _FIXED_SEED:
            self.seed = state.get("sampler_seed", self.seed)
        self._new_study(enqueue=state.get("asks", 0) == 0)  # the zone-rule trial is still waiting
        self._asks = state.get("asks", 0)
        for key, value in state.get("study_attrs", {}).items():
            self.study._storage.set_study_system_attr(self.study._study_id, key, value)
        for t in state.get("trials", []):
            self.study.add_trial(optuna.trial.create_trial(
                params=t["params"], distributions={k: self.distributions[k] for k in t["params"]},
                value=t["value"] if t["state"] == "COMPLETE" else None,
                state=optuna.trial.TrialState[t["state"]], system_attrs=t["system_attrs"]))


@search_agents.register("optuna-tpe")
class TPEAgent(OptunaAgent):
    """Optuna's TPE (tree-structured Parzen estimator; multivariate over the units)."""

    name = "optuna-tpe"
    sampler_name = "TPESampler"

    def __init__(self, space: SearchSpace, **kwargs: Any) -> None:
        kwargs.setdefault("sampler_args", {"multivariate": True, "n_startup_trials": 6})
        super().__init__(space, **kwargs)


@search_agents.register("optuna-gp")
class GPAgent(OptunaAgent):
    """Optuna's Gaussian-process sampler (log expected improvement)."""

    name = "optuna-gp"
    sampler_name = "GPSampler"

    def __init__(self, space: SearchSpace, **kwargs: Any) -> None:
        kwargs.setdefault("sampler_args", {"n_startup_trials": 6})
        super().__init__(space, **kwargs)


@search_agents.register("optuna-cmaes")
class CmaEsAgent(OptunaAgent):
    """Optuna's CMA-ES on integer-encoded actions (CMA-ES samples categoricals at random)."""

    name = "optuna-cmaes"
    sampler_name = "CmaEsSampler"
    integer = True


@search_agents.register("optuna-qmc")
class QMCAgent(OptunaAgent):
    """Optuna's quasi-Monte Carlo sampler (scrambled Sobol, seeded by the agent's seed): space-filling, no model.
    Optuna's ``QMCSampler`` defaults to ``scramble=False``, where the seed does nothing and every seed gives the
    same search; leap scrambles unless ``sampler_args`` says otherwise."""

    name = "optuna-qmc"
    sampler_name = "QMCSampler"

    def __init__(self, space: SearchSpace, **kwargs: Any) -> None:
        kwargs["sampler_args"] = {"scramble": True, **(kwargs.get("sampler_args") or {})}
        super().__init__(space, **kwargs)
