"""Online search during generation: every search iteration is one real draft/verify step.

:class:`OnlineSearch` decodes a prompt while an agent searches (LEAP Stage II):

1. **calibrate**: ``base_steps`` plain decoding steps measure ``t_base``, the time of one plain step, in this process
   (their tokens are kept, nothing is wasted);
2. **search**: each iteration ``config = agent.ask(history)``, one real step under it, reward = measured speedup
   ``committed * t_base / step time`` (or the cost-model reward), recorded in the runner's
   :class:`~leap.search.history.SearchHistory` and told to the agent; until ``agent.converged(history)`` or ``budget``
   iterations;
3. **fix**: ``agent.best(history)`` decodes the rest of the prompt, unless its mean reward is below ``min_speedup``
   (default 1.0) or it is None: then plain decoding does. If no trial reaches ``min_speedup`` within ``give_up``
   iterations (default 10), the search stops early and falls back.

**Losing cheaply** (``loss_budget``, default 0.03): while no configuration's mean reward has reached ``min_speedup``,
the trials' measured loss (their time beyond ``committed * t_base`` plus the agent's; with the cost-model reward the
modelled costs) may reach at most ``loss_budget`` of the request's plain time; then plain decoding finishes. When the
last search found nothing paying and building the space (LEAP's Stage I, as measured on the last prompt that built it,
drafters' one-time loading left out) costs more than this request may lose, the request is decoded plainly without it
- for 1, 2, 4, ... requests after 1, 2, 3, ... fruitless searches in a row. So where nothing pays LEAP costs about
``loss_budget`` over plain decoding. ``SearchOutcome.stop`` says why the search ended.

**Settled by the memory** (with a :class:`~leap.search.memory.SearchMemory`): once a drafter option's mean reward on
this request reaches ``min_speedup`` and no other option can be expected to win - by its trials here or, untried, by
what the memory remembers of it - the search stops (``stop = "memory"``) and the rest of the request runs the best
(:meth:`~leap.search.memory.SearchMemory.settles` has the rules). ``favourite_first`` (on by default) runs the memory's
favourite first (an option measured here on one request counts: :meth:`_carry`), and a request that confirms it (at
least ``keep`` times its remembered mean) stops there; while untried options this machine measured hold the request,
the best of them is the next trial, and the agent draws among the others (:meth:`SearchMemory.settles`). With no
favourite (no memory, or an empty one), a request that carries nothing on hands its leader (its best option without
layers that paid) to the next request as its first trial, which counts towards carrying it (from an empty memory,
128-token requests otherwise each searched again from scratch: ``docs/data/regret-1c947d6/long-t0``). Each of the
memory's conditions (:meth:`~leap.search.memory.SearchMemory.condition`: short and long prompts, greedy and sampled)
keeps its own carried choice, handed leader, plain step time and streak of fruitless searches.

**Abandoned trials** (``abandon``, default 0.5): a trial of several steps stops at its half when those steps measured
below ``abandon`` times the best mean reward another configuration has on this request (on Spec-Bench, 11 of 14 trials
after the first two requests' first trials measured below half the best reward before them:
``docs/data/regret-a0f27b7/b1-t0``). One successive-halving round within a trial (Jamieson & Talwalkar 2016).

Search overhead (``ask``/``tell``, the agent's probes) is reported separately. Greedy output stays plain decoding's.

With a drafter dimension (:class:`~leap.search.drafter_space.JointSpace`) the agent proposes
:class:`~leap.search.drafter_space.DraftChoice` values; the runner keeps one drafter per option across prompts and
attaches all of them to each session, so every one of them learns from every verification.

Who calls what: ``leap generate --method NAME`` and the benchmarks build an :class:`OnlineSearch`
with :func:`build_space` and :func:`leap.search.base.make_agent`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from leap.core.config import LayerConfig
from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.drafters import Drafter, make_drafter
from leap.core.errors import SettingsError
from leap.core.decoding.outcome import StepRecord
from leap.core.modeling.probe import ContextProbe
from leap.core.modeling.trace import LayerTrace
from leap.redundancy.build import baseline_space, build_space
from leap.search.base import SearchAgent
from leap.search.drafter_space import DraftChoice, DrafterOption
from leap.search.history import SearchHistory
from leap.search.memory import SearchMemory
from leap.search.reward import CostModelSpeedup, MeasuredSpeedup
from leap.search.settings import SearchOutcome, SearchSettings, carry_objection

__all__ = ["OnlineSearch", "SearchSettings", "SearchOutcome", "build_space", "baseline_space"]  # the last two re-exported from leap.redundancy.build

#: the trials an option needs on a request that ended inside its search before they carry it on (:meth:`_carry`)
MIN_CARRY_TRIALS = 2


@dataclass
class _AcrossRequests:
    """What one request leaves the next (:class:`OnlineSearch`); each memory condition keeps its own."""

    t_base: float = 0.0  # the last measured plain step time (a carried request reuses it)
    carried: Any = None  # settings.carry_over: the choice reused without a search ...
    carry_left: int = 0  # ... and for how many more prompts
    space_s: float | None = None  # what building the space and agent cost on the last prompt (measured)
    last_paid: bool | None = None  # whether the last search found a configuration that paid
    fruitless: int = 0  # searches in a row that found nothing paying
    skips_left: int = 0  # requests still to decode plainly without the space (doubling per fruitless search)
    handed: DraftChoice | None = None  # the last request's leader, which carried nothing on (module docstring)


class OnlineSearch:
    """Decode with an agent searching configurations online (see the module docstring)."""

    def __init__(self, decoder: SelfSpecDecoder, agent: SearchAgent | Callable[[LayerTrace | None], SearchAgent],
                 settings: SearchSettings = SearchSettings(), *, trace_positions: int = 8,
                 memory: SearchMemory | None = None) -> None:
        """``agent`` is an agent, or a factory called with each prompt's prefill trace (LEAP builds
        its search space per prompt from it; a factory may also return one persistent agent)."""
        self.decoder = decoder
        self.memory = memory  # what each request measured per drafter option, for the next (leap.search.memory)
        self.agent_factory = agent if not isinstance(agent, SearchAgent) else (lambda trace: agent)
        self.settings = settings
        self.trace_positions = trace_positions
        self.agent: SearchAgent | None = None
        self.built_space = False
        self.drafters: dict[DrafterOption, Drafter] = {}  # one instance per option, kept across prompts
        self._state = _AcrossRequests()  # what the last request of the current memory condition left the next
        self._condition = ""  # that condition (the memory's: short, long); the others' states are parked (_enter)
        self._parked: dict[str, _AcrossRequests] = {}

    def forget(self) -> None:
        """Forget what earlier requests taught the search (the last plain step time, a carried or handed choice, the
        streak of fruitless searches); the drafters stay made. The memory is its owner's to reset. ``leap bench``
        calls it after its untimed warm-up (:meth:`leap.bench.methods.BenchMethod.after_warm_up`)."""
        self._state, self._parked = _AcrossRequests(), {}

    def _enter(self, condition: str) -> None:
        """Switch to ``condition``'s own state (:class:`_AcrossRequests`), parking the last condition's (module
        docstring): a short prompt between long ones does not end their carry."""
        if condition != self._condition:
            self._parked[self._condition] = self._state
            self._state = self._parked.pop(condition, _AcrossRequests())
            self._condition = condition

    def _drafter(self, option: DrafterOption) -> Drafter:
        if option not in self.drafters:
            drafter = make_drafter(option.name, **option.kwargs)
            key = drafter.shared_state_key()
            twin = next((d for d in self.drafters.values() if key is not None and d.shared_state_key() == key), None)
            if twin is not None:  # e.g. lowbit at another chain length: one runner, the prompt taken in once
                drafter.share_state(twin.state_owner())
            self.drafters[option] = drafter
        return self.drafters[option]

    def _step(self, session, config):
        """One real step under a LayerConfig, a DraftChoice (drafter + config) or None (plain)."""
        if isinstance(config, DraftChoice):
            return session.step(config.config, drafter=self._drafter(config.drafter))
        return session.step(config, drafter=None)

    def _trial(self, session, config, reward, history: SearchHistory) -> list[StepRecord]:
        """``steps_per_trial`` real steps under ``config`` (fewer if the prompt ends, or if the trial is abandoned at
        its half: ``SearchSettings.abandon``, module docstring)."""
        s = self.settings
        others = [mean for c, (mean, *_) in history.mean_rewards().items() if c != config]
        bar = s.abandon * max(others) if s.abandon and others else None
        half = (s.steps_per_trial + 1) // 2
        if s.steady and isinstance(config, DraftChoice):  # a drafter that ramps up starts at its pace
            self._drafter(config.drafter).steady_start()
        records = [self._step(session, config)]
        while len(records) < s.steps_per_trial and not session.done:
            if bar is not None and len(records) >= half and reward.trial(records) < bar:
                break
            records.append(self._step(session, config))
        return records

    def generate(self, prompt: str | Sequence[int], **kwargs: Any) -> SearchOutcome:
        """Decode ``prompt`` (keyword arguments as in :meth:`SelfSpecDecoder.start`)."""
        s = self.settings
        session = self.decoder.start(prompt, trace_positions=self.trace_positions, **kwargs)
        if self.memory is not None:  # short and long prompts, T = 0 and T > 0 keep their own means and carry
            self._enter(self.memory.condition(session.prompt_len, temperature=session.settings.temperature))
        state = self._state
        clock = session.stack.clock  # synchronises the device before reading the host clock

        # t_base: plain steps after one untimed warm-up step (the first step after a prefill runs cold on a GPU: new
        # shapes, allocator growth); their tokens are kept. A request that carries an earlier choice runs no trial and
        # reuses the last measured t_base (three tokens at plain speed cost a few percent of a request)
        if s.carry_over and state.carry_left > 0 and state.carried is not None and state.t_base > 0:
            t_base = state.t_base
        else:
            base_times = [session.step(None, drafter=None).time_s for _ in range(s.base_steps + 1) if not session.done]
            base_times = base_times[1:] if len(base_times) > 1 else base_times
            t_base = statistics.median(base_times) if base_times else 0.0
            state.t_base = t_base if t_base > 0 else state.t_base
        # t_base <= 0: the prompt ended before; nothing to search
        reward = CostModelSpeedup(self.decoder.costs) if s.reward == "cost" or t_base <= 0 else MeasuredSpeedup(t_base)
        plain_s = session.prefill_time_s + session.max_new_tokens * t_base  # the request, decoded plainly

        iterations, converged, stop, overhead = 0, False, "done", 0.0
        carried = state.carried if s.carry_over and state.carry_left > 0 else None
        if carried is not None:  # an earlier prompt's choice that kept paying: no search this time
            state.carry_left -= 1
            stop = "carried"
        # losing cheaply: when the last search found nothing paying and building the space and agent cost more
        # than this request may lose (measured reward only: the cost-model reward stays deterministic), skip it
        skip = carried is None and bool(s.loss_budget) and isinstance(reward, MeasuredSpeedup) \
            and state.last_paid is False and state.skips_left > 0 and state.space_s is not None \
            and state.space_s > s.loss_budget * plain_s
        history, search_t0 = SearchHistory(), clock()  # budget_s counts from here: the space's building is search time
        self.built_space = False  # whether this request built a space and an agent (read by leap generate --json)
        if skip:
            stop = "loss_budget"
            state.skips_left -= 1
        elif carried is not None:
            # no search: neither the space (LEAP's Stage I probe forwards) nor the other options' drafters are
            # paid for; the carried drafter alone joins (a lowbit option takes the prompt in now, as it would)
            t0 = clock()
            if isinstance(carried, DraftChoice):
                session.attach(self._drafter(carried.drafter))
            overhead = clock() - t0
        else:
            self.built_space = True
            t0 = clock()
            self.agent = self.agent_factory(session.trace)
            self.agent.on_prompt(ContextProbe(session))
            first_use = 0.0  # drafters made and loaded now for the first time: a one-time cost
            for option in self.agent.space.options:  # stateful drafters learn from every later step
                fresh, t1 = option not in self.drafters, clock()
                session.attach(self._drafter(option))
                first_use += clock() - t1 if fresh else 0.0
            overhead = clock() - t0
            state.space_s = overhead - first_use
        lost = 0.0  # the trials' loss (the space's cost is governed by the skip above)
        handed, state.handed = (state.handed if carried is None and not skip else None), None
        holding: list[str] = []  # the untried options the memory says could still win (_settled), best first
        while carried is None and not skip and not session.done:
            if iterations >= s.budget or (s.budget_s and clock() - search_t0 >= s.budget_s):
                stop = "budget" if iterations >= s.budget else "time"  # iterations, or seconds (budget_s), spent
                break
            if s.loss_budget and t_base > 0 and lost > s.loss_budget * plain_s and not self._paying(history):
                stop = "loss_budget"  # losing cheaply: nothing paid, and the search has cost its share
                break
            t0 = clock()
            config = (self._held(holding) if len(history) else self._first_trial(handed)) if s.favourite_first else None
            if not len(history):  # the handed leader tried first: its earlier trial counts towards carrying it
                handed = handed if config is not None and config == handed else None
            config = config if config is not None else self.agent.ask(history)
            spent = clock() - t0
            steps = self._trial(session, config, reward, history)
            r = reward.trial(steps)
            committed, seconds = sum(x.committed for x in steps), sum(x.time_s for x in steps)
            history.record(config, r, committed=committed, drafted=sum(x.drafted for x in steps),
                           accepted=sum(x.accepted for x in steps), time_s=seconds)
            t0 = clock()
            self.agent.record(config, r, history)
            converged = self.agent.converged(history)
            spent += clock() - t0
            overhead += spent
            if isinstance(reward, MeasuredSpeedup):
                lost += spent + seconds - committed * t_base
            else:
                lost += (sum(reward.predicted_cost(x) for x in steps) - committed) * t_base
            iterations += 1
            if converged:
                stop = "converged"
                break
            if self._settled(history, handed, holding):
                stop = "memory"
                break
            if s.give_up and iterations >= s.give_up and max(t.reward for t in history) < s.min_speedup:
                stop = "give_up"  # nothing pays: stop spending steps on drafts
                break

        if carried is None and not skip and len(history):
            state.last_paid = self._paying(history)
            state.fruitless = 0 if state.last_paid else state.fruitless + 1
            state.skips_left = 2 ** (state.fruitless - 1) if state.fruitless else 0
        fixed = carried if carried is not None else self._choose(history, settled=stop == "memory")
        t_fixed, n_fixed = session.decode_time_s, len(session.new_token_ids)
        while not session.done:
            self._step(session, fixed)
        carry = ""
        if s.carry_over:
            means = history.mean_rewards()
            carry = self._carry(fixed, carried is not None, len(session.new_token_ids) - n_fixed,
                                session.decode_time_s - t_fixed, t_base, means[fixed][0] if fixed in means else None,
                                (means[fixed][1] if fixed in means else 0) + (handed is not None and fixed == handed),
                                rival=max((m for c, (m, *_) in means.items() if c != fixed), default=None))
        if carried is None and state.carried is None and len(history):
            state.handed = self._leader(history)
        if self.memory is not None:
            self._remember(history, fixed, len(session.new_token_ids) - n_fixed, session.decode_time_s - t_fixed,
                           t_base)
        generation = session.outcome()
        generation.config = str(fixed) if fixed is not None else None
        trials = [{"iteration": t.iteration, "config": None if t.config is None else str(t.config),
                   "reward": t.reward, "committed": t.committed, "drafted": t.drafted, "accepted": t.accepted}
                  for t in history]
        return SearchOutcome(generation, iterations, converged, None if fixed is None else str(fixed), overhead,
                             t_base, trials, carried_over=carried is not None, stop=stop, search_loss_s=lost,
                             carry=carry)

    def _remember(self, history: SearchHistory, fixed, tokens: int, seconds: float, t_base: float) -> None:
        """Hand the memory this request's mean trial reward per drafter option and the fixed phase's speedup."""
        means = _option_means(history)
        label = fixed.drafter.label if isinstance(fixed, DraftChoice) else None
        speedup = tokens * t_base / seconds if tokens > 0 and seconds > 0 and t_base > 0 else None
        self.memory.observe(means, label, speedup)

    def _settled(self, history: SearchHistory, handed: DraftChoice | None = None, holding: list | None = None) -> bool:
        """Whether the memory says no untried option can beat the best tried one (module docstring; ``handed``);
        ``holding`` is filled with the untried options that could, best first (:meth:`SearchMemory.settles`)."""
        options, s = self.agent.space.options, self.settings  # no options in a layer-only space: nothing to settle
        kin = {o.label: self.drafters[o].shared_state_key() for o in options if o in self.drafters} if s.kin else None
        return self.memory is not None and bool(options) and self.memory.settles(
            options, _option_means(history), min_speedup=s.min_speedup, explore=s.explore, kin=kin,
            favourite_first=s.favourite_first, handed=None if handed is None else handed.drafter.label, holding=holding)

    def _favourite(self) -> DraftChoice | None:
        """``favourite_first``: the memory's favourite option without layers, for agents that accept foreign trials."""
        ok = self.memory is not None and self.agent.accepts_foreign_trials
        options = [o for o in self.agent.space.options if not o.uses_layers]  # a remembered loser is not first
        option = self.memory.favourite(options, self.settings.min_speedup) if ok else None
        return None if option is None else DraftChoice(option, None)

    def _held(self, holding: list[str]) -> DraftChoice | None:
        """``favourite_first``: the best untried option that holds the request by what the memory remembers of it (the
        agent draws where none does: options the memory does not know, layer configurations)."""
        ok = self.memory is not None and self.agent.accepts_foreign_trials
        held = [o for label in holding for o in self.agent.space.options if o.label == label and not o.uses_layers]
        return DraftChoice(held[0], None) if ok and held else None

    def _first_trial(self, handed: DraftChoice | None) -> DraftChoice | None:
        """``favourite_first``: the memory's favourite, else the last request's leader (``handed``) where this request
        offers it (module docstring)."""
        favourite = self._favourite()
        if favourite is not None or handed is None or not self.agent.accepts_foreign_trials:
            return favourite
        return handed if handed.drafter in self.agent.space.options else None

    def _leader(self, history: SearchHistory) -> DraftChoice | None:
        """The option without layers whose mean trial reward on this request is best, if it reaches ``min_speedup``."""
        means = [(mean, c) for c, (mean, *_) in history.mean_rewards().items()
                 if isinstance(c, DraftChoice) and c.config is None]
        mean, best = max(means, key=lambda m: m[0]) if means else (0.0, None)
        return best if best is not None and mean >= self.settings.min_speedup else None

    def _paying(self, history: SearchHistory) -> bool:
        """Whether some configuration's mean reward so far reaches ``min_speedup`` (one the fix would keep)."""
        return any(mean >= self.settings.min_speedup for mean, *_ in history.mean_rewards().values())

    def _carry(self, fixed, was_carried: bool, tokens: int, seconds: float, t_base: float,
               trial_mean: float | None = None, trials: int = 0, rival: float | None = None) -> str:
        """Keep ``fixed`` for the next prompts unless a rule of :func:`~leap.search.settings.carry_objection` objects
        (its fixed phase's speedup is ``tokens`` in ``seconds`` against ``t_base``; a request that ended inside its
        search is judged by its trials' mean ``trial_mean`` once it ran :data:`MIN_CARRY_TRIALS` trials); the verdict,
        for the record: "carried", "renewed", "kept", or "not carried: " / "dropped: " and the rule."""
        speedup = tokens * t_base / seconds if fixed is not None and tokens > 0 and seconds > 0 and t_base > 0 \
            else trial_mean if fixed is not None and trials >= MIN_CARRY_TRIALS else None
        label = fixed.drafter.label if isinstance(fixed, DraftChoice) else None
        why = carry_objection(speedup, self.settings.min_speedup, self.memory, label, was_carried=was_carried,
                              rival=rival)
        state = self._state
        if why:
            state.carried, state.carry_left = None, 0
            return ("dropped: " if was_carried else "not carried: ") + why
        if not was_carried:
            state.carried, state.carry_left = fixed, self.settings.carry_over
            return "carried"
        if self.settings.carry_renew and self._holds_up(fixed, speedup):
            state.carry_left = self.settings.carry_over
            return "renewed"
        return "kept"

    def _holds_up(self, fixed, speedup: float) -> bool:
        """``carry_renew``: whether a carried request ran at >= ``keep`` times its option's remembered mean (this
        request not yet in it): re-searching every fifth request lost to ``lowbit`` (``docs/data/search_prior``)."""
        remembered = self.memory.expected(fixed.drafter.label) \
            if self.memory is not None and isinstance(fixed, DraftChoice) else None
        return remembered is not None and speedup >= self.memory.keep * remembered

    def _choose(self, history: SearchHistory, settled: bool = False) -> LayerConfig | None:
        """The agent's best, if it reaches ``min_speedup``; where the memory settled the request, its leader's best
        trial stands in for an agent's best below that (LEAP's MCTS fixes no layer draft outside its ratio band: a
        request settled on one decoded plainly, ``docs/data/regret-7212270/long-t0``, 484)."""
        if not len(history):
            return None  # no trial ran (the loss budget was spent on the space, or the prompt ended)
        best, means, bar = self.agent.best(history), history.mean_rewards(), self.settings.min_speedup
        if best is not None and best not in means:
            raise SettingsError(f"search agent {self.agent.name!r} ({type(self.agent).__name__}): best() returned "
                                f"{best}, which was never tried; best() must return a configuration from the "
                                "history (its measured reward decides the fallback) or None")
        if settled and (best is None or means[best][0] < bar):
            leader = max(_option_means(history).items(), key=lambda m: m[1])[0]
            best = max((c for c in means if isinstance(c, DraftChoice) and c.drafter.label == leader),
                       key=lambda c: means[c][0])
        return best if best is not None and means[best][0] >= bar else None


def _option_means(history: SearchHistory) -> dict[str, float]:
    """Each drafter option's mean trial reward on this request (by option label; layer-only trials left out)."""
    rewards: dict[str, list[float]] = {}
    for trial in history:
        if isinstance(trial.config, DraftChoice):
            rewards.setdefault(trial.config.drafter.label, []).append(trial.reward)
    return {label: sum(v) / len(v) for label, v in rewards.items()}
