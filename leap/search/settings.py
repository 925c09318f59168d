"""What an online search is told (:class:`SearchSettings`), what it returns (:class:`SearchOutcome`), and the rule
that carries a request's choice on to the next requests (:func:`carry_objection`).

Who calls what: :class:`leap.search.runner.OnlineSearch` (which re-exports both classes) runs a request under the
settings and returns the outcome; ``leap generate`` and the benchmarks' :class:`leap.bench.methods.SearchMethod` build
the settings from their flags. The rules each setting governs are described in :mod:`leap.search.runner`.

**The carry** (``carry_over``): once a request's fixed phase is done,
:meth:`~leap.search.runner.OnlineSearch._carry` asks :func:`carry_objection` which rule, if any, keeps its choice from
the next requests, and the outcome keeps the verdict (:attr:`SearchOutcome.carry`; ``leap bench``'s ``search_carry``),
so a run's records say why a choice was or was not carried on. The rules, each from a run that lost without it:

- the fixed phase must reach ``min_speedup`` (a request that ended inside its search: its trials' mean, once it ran
  :data:`~leap.search.runner.MIN_CARRY_TRIALS` trials; one few-step trial carried losers on:
  ``docs/data/xeon_rebaseline``);
- with a memory, the option's remembered mean (or, not yet remembered, this request's measurement) must reach
  ``keep`` times the best mean this machine measured (a short search's luck is otherwise carried on:
  ``docs/data/handoff``; the shipped prior's means, another machine's, do not end a carry);
- a choice this machine measured on fewer than ``min_requests`` requests is carried only once its fixed phase beat
  every other trial on its request (``rival``: a ``gated`` chosen by one lucky trial, the prior's mean behind it, was
  carried at 0.79 of ``lowbit``, ``docs/data/regret-amd-e75bfc1``, long-t0, 488-490);
- a carried choice is dropped once an option measured here on fewer requests is remembered above it
  (:meth:`~leap.search.memory.SearchMemory.best_unproven`), which the next request tries first (a lucky ``suffix``
  whose fixed phase ran below ``lowbit``'s trial was carried over eight long requests at 0.84 of ``lowbit``:
  ``docs/data/regret-xeon-186fde1/long-t0``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from leap.core.decoding.outcome import GenerationOutcome
from leap.core.errors import SettingsError

if TYPE_CHECKING:
    from leap.search.memory import SearchMemory

__all__ = ["SearchSettings", "SearchOutcome", "carry_objection"]


@dataclass(frozen=True)
class SearchSettings:
    """``budget``: search iterations per prompt; ``base_steps``: plain steps timing ``t_base``;
    ``min_speedup``: the fixed configuration's mean reward must reach it, else plain decoding;
    ``give_up``: stop searching after this many iterations if no trial has reached ``min_speedup``
    (0 = never); ``reward``: "measured" or "cost"; ``steps_per_trial``: real steps per search
    iteration, rewarded as one (their summed tokens over their summed time). LEAP's trial is one step
    (default 1); model-free drafts accept 0 to 7+ tokens from one step to the next, so a one-step
    reward mostly measures luck and a search over drafters is steadier with 3-4; ``carry_over``: reuse
    a fixed choice whose fixed phase measured at least ``min_speedup`` for up to this many following
    prompts without searching, and search again as soon as it stops paying (0 = search every prompt,
    LEAP's); ``carry_renew``: a carried request at >= ``keep`` times its option's remembered mean restarts the
    ``carry_over`` count (a choice that holds up is not searched again every few requests); ``loss_budget``: the
    most the search may lose, as a fraction of the request's plain-decoding time, before some configuration pays
    (module docstring; 0 = no limit); ``budget_s``: the most seconds a request's search may take, set-up included (0 =
    no limit; ``stop`` = "time"): an equal wall-clock budget for agents whose asks cost differently (issue 34);
    ``favourite_first``: the memory's favourite option is a request's first trial, and while untried options this
    machine measured hold the request, the best of them is the next; settle once none is remembered above the leader,
    or once the favourite confirms what the memory expected of it (module docstring; the default);
    ``abandon``: a trial whose first half (of ``steps_per_trial``) measured below ``abandon`` times the best mean reward
    of another configuration on this request stops there (module docstring; 0 = every trial runs whole); ``explore``:
    with a memory, the options a request tries before those it does not yet remember stop holding its search (module
    docstring; 0 = every one holds it, the ablation); ``kin``: a favourite that falls short of the shipped prior's
    mean for it says how fast this machine runs its draft model, and the options drafting with that model are
    expected at the same shortfall (:meth:`~leap.search.memory.SearchMemory.settles`; False: the ablation);
    ``steady``: a trial starts its drafter at the pace a request's first steps ramp up to
    (:meth:`~leap.core.drafters.base.Drafter.steady_start`; False: at the ramp's start, the ablation)."""

    budget: int = 40
    base_steps: int = 2
    min_speedup: float = 1.0
    give_up: int = 10
    reward: str = "measured"
    steps_per_trial: int = 1
    carry_over: int = 0
    carry_renew: bool = False
    loss_budget: float = 0.03
    budget_s: float = 0.0
    favourite_first: bool = True
    abandon: float = 0.5
    explore: int = 4
    kin: bool = True
    steady: bool = True

    def __post_init__(self) -> None:
        if self.budget < 0 or self.base_steps < 0 or self.give_up < 0 or self.steps_per_trial < 1 \
                or self.carry_over < 0 or not self.loss_budget >= 0 or not self.budget_s >= 0 \
                or not 0 <= self.abandon < 1 or self.explore < 0:
            raise SettingsError("search settings: budget, base_steps, give_up, carry_over, loss_budget, budget_s and "
                                "explore must be >= 0, steps_per_trial >= 1, abandon in [0, 1)")
        if self.reward not in ("measured", "cost"):
            raise SettingsError(f"reward must be 'measured' or 'cost', got {self.reward!r}")


@dataclass
class SearchOutcome:
    """A generation plus what the search did."""

    generation: GenerationOutcome
    iterations: int
    converged: bool
    fixed_config: str | None
    search_overhead_s: float
    t_base_s: float
    trials: list[dict[str, Any]] = field(default_factory=list)
    carried_over: bool = False  # the fixed choice came from an earlier prompt (SearchSettings.carry_over)
    #: why the search ended: "converged", "budget" (iterations), "time" (seconds), "give_up", "loss_budget", "memory"
    #: (settled by earlier requests), "done" (the prompt ended first) or "carried" (an earlier prompt's choice)
    stop: str = ""
    search_loss_s: float = 0.0  # the trials' time beyond plain decoding's for their tokens, plus agent time
    #: the carry's verdict on this request's choice (``OnlineSearch._carry``; "" without ``carry_over``)
    carry: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**self.generation.to_dict(), "search_iterations": self.iterations, "converged": self.converged,
                "fixed_config": self.fixed_config, "search_overhead_s": self.search_overhead_s,
                "t_base_s": self.t_base_s, "trials": self.trials, "carried_over": self.carried_over,
                "search_stop": self.stop, "search_loss_s": self.search_loss_s,
                "search_carry": self.carry}


def carry_objection(speedup: float | None, min_speedup: float, memory: SearchMemory | None, label: str | None, *,
                    was_carried: bool, rival: float | None) -> str:
    """The first rule (module docstring) that keeps option ``label`` (None: a layer configuration, no option) from
    being carried on after a fixed phase at ``speedup`` (None: no fixed phase to judge), or "" where none does.
    ``was_carried``: the request ran a choice carried from an earlier one; ``rival``: the best mean trial reward of any
    other configuration on this request (None: none)."""
    if speedup is None:
        return "no fixed phase"
    if speedup < min_speedup:
        return "below min_speedup"
    if memory is None:
        return ""
    mean = memory.expected(label) if label is not None else None
    best = memory.best_expected(here=True)
    if best is not None and (speedup if mean is None else mean) < memory.keep * best:
        return "below the best measured here"
    here = memory.requests_here(label) if label is not None else 0
    if here < memory.min_requests and not was_carried and rival is not None and speedup < rival:
        return "below a rival trial"
    mine = memory.remembered(label) if label is not None else None
    challenger = memory.best_unproven()
    if was_carried and mine is not None and challenger is not None and mine < challenger:
        return "an option remembered above it"
    return ""
