"""Benchmark methods: one object per method name, each decoding token ids.

A :class:`BenchMethod` turns a prompt's token ids into a :class:`MethodResult` (new tokens, decoding steps, accepted
length per step, the configuration used, and the *parts* of its time it can name: prefill, decoding steps, search
overhead). No method reports its own total: the harness (:mod:`leap.bench.harness`) holds one wall clock around the
whole :meth:`BenchMethod.run` call - space building, search, probes, prefill and decoding - and records the parts
beside it, with the remainder as ``other_s``. It calls :meth:`BenchMethod.run` once per prompt, turn, temperature and
run, interleaving the methods per prompt.

Names resolve in this order (:func:`make_method`):

1. ``bench_methods`` (entry-point group ``leap.bench_methods``): ``ar`` (plain decoding), ``leap`` and its
   ablations (LEAP Table 2), ``leap-drafters`` (the search over drafters and layers), and transformers as peers
   (:mod:`leap.bench.peers`: ``hf-ar``, ``hf-static``, ``hf-pld``, ``hf-early-exit``);
2. any search agent (``leap agents``): online search on LEAP's space (SWIFT and CLaSP on theirs);
3. any drafter (``leap drafters``): the decoder drafting with it; ``config=`` (a configuration in
   compact or sparse form, e.g. ``hybrid:config=skip=5-7``) gives ``layer-skip`` and ``hybrid``
   their layers, ``policy=`` their draft-length policy.

Per-method constructor arguments come from ``leap bench --method-arg NAME:KEY=VALUE``.

Batches (``leap bench --batch-size B``): :meth:`BenchMethod.run_batch`; ``ar``, the drafters without layers and
``layer-skip`` with its ``config`` (:class:`leap.core.decoding.batch.BatchDecoder`; ``batch_cap=N|auto``, auto: a
goodput bandit over caps, measuring plain decoding again every ``batch_refresh`` steps), ``leap-drafters``
(:meth:`SearchMethod.run_batch`) and transformers' plain ``hf-ar`` and ``hf-static``
(:meth:`leap.bench.peers.TransformersPeer.run_batch`) can; the others refuse, on record.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from leap.core.config import LayerConfig
from leap.core.decoding.batch import BatchDecoder, batch_refusal
from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.drafters import drafters
from leap.core.errors import SettingsError, UnknownNameError
from leap.core.modeling.model import LeapModel
from leap.core.decoding.outcome import GenerationOutcome
from leap.core.registry import Registry

__all__ = ["BenchMethod", "BenchOptions", "MethodResult", "bench_methods", "make_method", "method_names"]


@dataclass(frozen=True)
class BenchOptions:
    """Settings every method shares: the online search's (``budget``, ``reward``, ``min_speedup``, ``give_up``), the
    layer-skip draft's policy, the base seed of agents, and the tree verification rule under sampling (``tree_verify``:
    :data:`leap.core.verify.tree_rules.tree_rules`)."""

    budget: int = 40
    reward: str = "measured"
    min_speedup: float = 1.0
    give_up: int = 10
    draft_policy: str = "confidence"
    seed: int = 0
    steps_per_trial: int = 1
    tree_verify: str = "match"  # how draft trees (and, for traversal, sampled chains) are verified under sampling
    loss_budget: float = 0.03  # the search's loss cap before something pays (leap.search.runner.SearchSettings)


@dataclass
class MethodResult:
    """What one generation produced and cost (Spec-Bench's answer fields plus leap's)."""

    token_ids: list[int]
    steps: int
    accepted_lengths: list[int] | None = None
    config: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: named parts of the call's time, in seconds (``prefill_s``, ``decode_s``, ``search_overhead_s``);
    #: the harness's wall clock around the call is the total, the rest of it is recorded as ``other_s``
    parts: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_outcome(cls, outcome: GenerationOutcome, parts: dict[str, float] | None = None,
                     **extra: Any) -> MethodResult:
        return cls(list(outcome.token_ids), len(outcome.steps), outcome.accepted_lengths, outcome.config,
                   dict(extra), {"prefill_s": outcome.prefill_time_s, "decode_s": outcome.decode_time_s,
                                 **(parts or {})})


class BenchMethod:
    """Base class: ``run`` decodes ``ids`` and returns a :class:`MethodResult`; ``run_batch`` (``leap bench
    --batch-size B``) decodes several prompts together, where the method can."""

    name = "base"
    #: True for a method whose first call at a longer prompt or budget compiles or captures (transformers' static
    #: cache sizes itself to the longest call so far and recompiles when it grows; leap's graph engine binds its CUDA
    #: graphs to such a cache): the harness warms it up once more on a prompt of its own as long as the longest
    #: evaluated one, at the run's ``max_new_tokens``, so that no timed call pays it
    warms_up_at_run_length = False

    def run(self, ids: list[int], *, max_new_tokens: int, temperature: float, seed: int) -> MethodResult:
        raise NotImplementedError

    def after_warm_up(self) -> None:
        """The harness's untimed warm-up calls are done (:meth:`leap.bench.harness.Bench._warm_up`). A method that
        learns across calls forgets here what they taught it, so that its first timed call starts from the state its
        records name (a search from an empty memory or the shipped prior, not from one that measured 16 tokens of a
        warm-up prompt); what only costs time (a loaded drafter, a compiled step) stays. The base learns nothing."""

    def run_batch(self, batch: list[list[int]], *, max_new_tokens: int, temperature: float,
                  seed: int) -> MethodResult:
        """Decode ``batch`` together: the rows' tokens concatenated in ``token_ids``, each row's under
        ``extra["row_token_ids"]`` (issue 37). The base refuses: the method decodes one request at a time."""
        raise SettingsError(f"{self.name} decodes one request at a time (--batch-size 1); batched decoding is "
                            f"built for ar and the drafters without layers (leap.core.decoding.batch)")


def batch_result(out: Any, labels: Sequence[str] = (), decoder: Any = None) -> MethodResult:
    """A :class:`leap.core.decoding.batch.BatchOutcome` as one record's result; ``labels`` name the decoder's drafters
    where it holds several (``batch_drafters``: each step's). Every step's rows, tokens, seconds, progress and worth
    (``batch_step_*``); with the :class:`~leap.core.decoding.batch.BatchDecoder`, its all-in tally's plain rate per row
    count (``batch_plain_rate``) and the tally after the batch (``batch_tally``): why its budget ran, its kin went."""
    rows = out.rows
    extra = {"row_token_ids": [r.token_ids for r in rows], "row_new_tokens": [len(r.token_ids) for r in rows],
             "row_latency_s": [r.latency_s for r in rows], "batch_caps": out.caps,
             "batch_step_rows": out.step_rows, "batch_step_committed": out.step_committed,
             "batch_step_s": out.step_s, "batch_step_progress": out.step_progress, "batch_step_worth": out.step_worth,
             "batch_step_draft_s": out.step_draft_s, "batch_step_width": out.step_width}
    if len(labels) > 1:
        extra["batch_drafters"] = [labels[i] if cap else "plain" for i, cap in zip(out.drafters, out.caps)]
    if decoder is not None:
        extra["batch_plain_rate"] = {str(n): decoder.plain_rate(n) for n in sorted(set(out.step_rows))}
        extra["batch_tally"] = [decoder.tally.seconds, decoder.tally.plain_s]
    return MethodResult([t for r in rows for t in r.token_ids], out.steps, [n for r in rows for n in r.accepted_lengths],
                        None, extra, {"prefill_s": out.prefill_time_s, "decode_s": out.decode_time_s})


BenchFactory = Callable[..., BenchMethod]  # (model, options, **method_args) -> BenchMethod
bench_methods: Registry[BenchFactory] = Registry("benchmark method", "leap.bench_methods",
                                                  builtin_modules=("leap.bench.peers",))


class DecoderMethod(BenchMethod):
    """A :class:`SelfSpecDecoder` run as is: plain decoding, a fixed configuration, or a drafter; ``batch`` (a
    :class:`leap.core.decoding.batch.BatchDecoder`) decodes batches where it can (plain, drafters without layers)."""

    def __init__(self, name: str, decoder: SelfSpecDecoder, batch: Any = None) -> None:
        self.name, self.decoder, self.batch = name, decoder, batch

    @property
    def warms_up_at_run_length(self) -> bool:
        """On the graph engine (CUDA's default) its graphs are bound to a cache sized by the longest request so far:
        warmed up at the run's length, no timed call binds and captures them again."""
        return self.decoder.stack.graphs is not None

    def run(self, ids, *, max_new_tokens, temperature, seed):
        out = self.decoder.generate(ids, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
        return MethodResult.from_outcome(out)

    def run_batch(self, batch, *, max_new_tokens, temperature, seed):
        if self.batch is None:
            return super().run_batch(batch, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
        return batch_result(self.batch.generate(batch, max_new_tokens=max_new_tokens, temperature=temperature,
                                                seed=seed), decoder=self.batch)

    def after_warm_up(self) -> None:
        """A bandit over caps (``batch_cap=auto``) starts the run from nothing, as the search does."""
        if self.batch is not None:
            self.batch.forget()


def _batch_cap(value: Any) -> int | str:
    """``batch_cap=N|auto``: the draft tokens per row and step of a batch (auto: the goodput bandit)."""
    if str(value) == "auto" or str(value).isdigit():
        return "auto" if str(value) == "auto" else int(value)
    raise SettingsError(f"batch_cap takes a number of draft tokens or auto, got {value!r}")


def _judge(value: Any) -> bool | float:
    """``batch_judge_all_in=true|false|CONFIDENCE``, ``batch_bar=true|false|MARGIN`` (true/false: bools; numbers: floats)."""
    if isinstance(value, bool) or str(value).lower() in ("true", "false"):
        return value if isinstance(value, bool) else str(value).lower() == "true"
    return float(value)


def _first_step(value: Any) -> bool | str:
    """``batch_first_step=true|false|switch`` (JSON true/false arrive as bools)."""
    return "switch" if str(value) == "switch" else str(value).lower() in ("true", "1")


class SearchMethod(BenchMethod):
    """An agent searching online (:class:`leap.search.runner.OnlineSearch`) on every prompt."""

    def __init__(self, name: str, model: LeapModel, options: BenchOptions, agent: str, *, zones: bool = True,
                 groups: bool = True, search: bool = True, drafters: Sequence[str] | str | None = None,
                 steps_per_trial: int | None = None, budget: int | None = None, carry_over: int = 0,
                 carry_renew: bool = False, loss_budget: float | None = None, zone_metric: str = "residual-ratio",
                 group_metric: str = "ear-gain", metric_args: dict[str, dict[str, Any]] | None = None,
                 low_bit: bool = False, low_bits: int = 8, seed: int | None = None, memory: str = "fresh",
                 drafter_settings: bool = True, memory_horizon: int = 8, memory_recheck: int = 16,
                 memory_long_prompt: int = 512, memory_sampled: bool = True, memory_rescale: bool = True,
                 budget_s: float = 0.0, give_up: int | None = None, favourite_first: bool = True, abandon: float = 0.5,
                 explore: int = 4, kin: bool = True, steady: bool = True, batch_reward: str = "mean",
                 batch_caps: Sequence[int] | str = (0, 2, 4, 8, 16), batch_screen: bool | str = True,
                 batch_switching: bool = False, batch_first_step: bool | str = "switch", batch_prune: float | None = 1.0,
                 batch_refresh: int = 32, batch_rejoin: bool = True, batch_judge_all_in: bool | float = True,
                 batch_kin_all_in: bool = True, batch_kin_confidence: float | bool = 0.95, batch_kin_by_rows: bool = True,
                 batch_fresh_bar: bool = True, batch_bar: bool | float = 0.2, **agent_kwargs: Any) -> None:
        from leap.search.factory import agent_factory
        from leap.search.memory import SearchMemory
        from leap.search.memory.store import memory_for
        from leap.search.runner import OnlineSearch, SearchSettings

        self.name = name
        drafters = [d for d in drafters.split(";") if d] if isinstance(drafters, str) else drafters
        self._model, self._options, self._batch = model, drafters, None  # run_batch's (a BatchSearch)
        self._warm_batches: dict[float, list[list[int]]] = {}  # the last batch run_batch saw, per temperature
        caps = tuple(int(c) for c in (batch_caps.split(";") if isinstance(batch_caps, str) else batch_caps))
        budget_per_batch = options.loss_budget if loss_budget is None else float(loss_budget)  # per batch too
        self._batch_settings = dict(caps=caps, loss_budget=budget_per_batch or None, screen=batch_screen,
                                    switching=bool(batch_switching), first_step_setup=_first_step(batch_first_step),
                                    prune=None if batch_prune in (None, False) else float(batch_prune),
                                    refresh=int(batch_refresh), rejoin=bool(batch_rejoin),
                                    judge_all_in=_judge(batch_judge_all_in), kin_all_in=bool(batch_kin_all_in),
                                    reward=str(batch_reward), fresh_bar=bool(batch_fresh_bar), kin_by_rows=bool(batch_kin_by_rows),
                                    kin_confidence=batch_kin_confidence, batch_bar=_judge(batch_bar))
        if memory not in ("fresh", "prior", "first", "persist", "off") and not str(memory).endswith(".json"):
            raise SettingsError(f"{name}: memory must be fresh (empty at the start, kept across the run), prior (the "
                                f"same from the prior leap ships: leap/data/search_memory), first (every request a new "
                                f"machine's first: a new search from that prior), persist ($LEAP_CACHE/search_memory), "
                                f"off, or a FILE.json (read if it exists, written as the run learns), got {memory!r}")
        # empty unless told (a memory learnt on evaluation prompts would tune on the test); the records name it
        memory_settings = dict(horizon=int(memory_horizon), recheck=int(memory_recheck), rescale=bool(memory_rescale),
                               long_prompt=int(memory_long_prompt), sampled=bool(memory_sampled))  # 0, false: ablations
        if memory == "off" or not drafters:
            self.memory = None
        elif str(memory).endswith(".json"):
            self.memory = SearchMemory(memory, **memory_settings)
        else:
            self.memory = memory_for(model, persist=memory == "persist", prior=memory != "fresh", **memory_settings)
            if memory in ("prior", "first") and self.memory.prior is None:  # the run would read as a prior's
                print(f"leap: {name}: memory={memory}, but leap ships no search prior for {model.name} on "
                      f"{model.device} in {str(model.dtype).replace('torch.', '')} (leap/data/search_memory): it "
                      "starts from an empty memory, as memory=fresh", file=sys.stderr, flush=True)
        self.memory_at_start = "off" if self.memory is None else self.memory.describe()
        self._memory_start = None if self.memory is None else self.memory.copy()  # after_warm_up goes back to it

        def searcher() -> OnlineSearch:  # one for the run; with memory=first, a new one for every request
            factory = agent_factory(agent, model.num_layers, zones=zones, groups=groups, search=search,
                                    seed=options.seed if seed is None else int(seed), agent_kwargs=agent_kwargs,
                                    drafters=drafters, zone_metric=zone_metric, group_metric=group_metric,
                                    metric_args=metric_args, low_bit=low_bit, memory=self.memory,
                                    drafter_settings=bool(drafter_settings))
            settings = SearchSettings(budget=options.budget if budget is None else int(budget), reward=options.reward,
                                      min_speedup=options.min_speedup, budget_s=float(budget_s),
                                      give_up=options.give_up if give_up is None else int(give_up),
                                      favourite_first=bool(favourite_first), carry_over=int(carry_over),
                                      loss_budget=options.loss_budget if loss_budget is None else float(loss_budget),
                                      steps_per_trial=steps_per_trial or options.steps_per_trial,
                                      carry_renew=bool(carry_renew), abandon=float(abandon),  # JSON: 0, true
                                      explore=int(explore), kin=bool(kin),
                                      steady=bool(steady))
            return OnlineSearch(SelfSpecDecoder(model, None, options.draft_policy, tree_verify=options.tree_verify,
                                                low_bits=int(low_bits)), factory, settings, memory=self.memory)

        self._first, self._searcher, self._memory_settings = memory == "first", searcher, memory_settings
        self.runner = searcher()

    def run_batch(self, batch, *, max_new_tokens, temperature, seed):
        """The drafter search at batch level (:class:`~leap.search.batch.BatchSearch`): a goodput bandit over (drafter,
        chain cap) arms, plain decoding among them, kept across the run's batches. Its settings are method arguments
        named ``batch_`` and the setting (docs/bench.md): ``batch_caps`` (0, 2, 4, 8 and 16;
        ``--method-arg leap-drafters:batch_caps='0;8'``), ``batch_screen``, ``batch_switching``,
        ``batch_first_step`` (``first_step_setup``), ``batch_refresh``, ``batch_fresh_bar`` and ``batch_bar``
        (:class:`~leap.core.decoding.batch.BatchDecoder`'s), ``batch_prune`` (false: off), ``batch_rejoin``,
        ``batch_judge_all_in`` (true: the point estimate; a confidence such as 0.95: beyond noise; false: off),
        ``batch_kin_all_in``, ``batch_kin_confidence`` (false: the point estimates), ``batch_kin_by_rows`` and ``batch_reward``
        (:class:`~leap.search.batch.BatchSearch`'s, each documented there); the search's ``loss_budget`` holds per
        batch. Layer options do not batch yet. With a memory, its batch set ranks the drafters before the first batch
        and learns after each (what single requests measured is not read)."""
        self._warm_batches[temperature] = batch  # after_warm_up warms the drafters of each condition on them
        if self._batch is None:
            from leap.search.batch import BatchSearch

            self._batch = BatchSearch(self._model, self._options or (), memory=self.memory, **self._batch_settings)
        if not self._batch.options:
            return super().run_batch(batch, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
        out = self._batch.generate(batch, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
        result = batch_result(out, self._batch.labels, self._batch.decoder)
        result.extra.update(batch_options=list(self._batch.labels), search_memory_at_start=self.memory_at_start)
        return result

    def after_warm_up(self) -> None:
        """Back to the memory the run started from, a batch bandit and a search that have measured nothing; the
        drafters stay loaded, every one of them (:meth:`~leap.search.batch.BatchSearch.warm`)."""
        if self.memory is not None:
            self.memory.adopt(self._memory_start)
        if self._batch is not None:
            for temperature, batch in self._warm_batches.items():
                self._batch.warm(batch, temperature=temperature)
            self._batch.forget()
        self.runner.forget()

    @property
    def warms_up_at_run_length(self) -> bool:
        """As :class:`DecoderMethod`'s: the search decodes through a decoder whose graphs a longer request re-binds."""
        return self.runner.decoder.stack.graphs is not None

    def run(self, ids, *, max_new_tokens, temperature, seed):
        if self._first:  # a new machine's first request: the memory back to the shipped prior, a new search
            from leap.search.memory.store import memory_for

            self.memory = memory_for(self._model, persist=False, prior=True, **self._memory_settings)
            self.runner = self._searcher()
        res = self.runner.generate(ids, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
        return MethodResult.from_outcome(
            res.generation, {"search_overhead_s": res.search_overhead_s}, search_iterations=res.iterations,
            converged=res.converged, t_base_s=res.t_base_s, carried_over=res.carried_over,
            search_stop=res.stop, search_loss_s=res.search_loss_s, search_carry=res.carry,
            trial_rewards=[t["reward"] for t in res.trials], trial_configs=[t["config"] for t in res.trials],
            search_memory_at_start=self.memory_at_start)


@bench_methods.register("ar")
def _ar(model: LeapModel, options: BenchOptions) -> BenchMethod:
    """plain autoregressive decoding (the speedup baseline; batched with --batch-size)"""
    return DecoderMethod("ar", SelfSpecDecoder(model, None), BatchDecoder(model))


def _leap(name: str, **ablation: bool) -> BenchFactory:
    def factory(model: LeapModel, options: BenchOptions, **agent_kwargs: Any) -> BenchMethod:
        return SearchMethod(name, model, options, "leap", **ablation, **agent_kwargs)

    factory.__doc__ = {"leap": "LEAP: zones + groups from the prefill, zone-aware MCTS on measured speedup",
                       "leap-no-zones": "LEAP w/o zone (Table 2): every layer middle-like",
                       "leap-no-groups": "LEAP w/o group (Table 2): one decision unit per layer",
                       "leap-no-search": "LEAP w/o MCTS (Table 2): zones + groups with a fixed rule",
                       "leap-low-bit": "LEAP with the per-layer precision action: middle and final layers may "
                                       "also run at low precision (weight-only int8; low_bits=4 for int4)"}[name]
    return factory


bench_methods.add("leap", _leap("leap"))
bench_methods.add("leap-no-zones", _leap("leap-no-zones", zones=False))
bench_methods.add("leap-no-groups", _leap("leap-no-groups", groups=False))
bench_methods.add("leap-no-search", _leap("leap-no-search", search=False))
bench_methods.add("leap-low-bit", _leap("leap-low-bit", low_bit=True))


@bench_methods.register("leap-drafters")
def _leap_drafters(model: LeapModel, options: BenchOptions, drafters: Sequence[str] | str | None = None,
                   agent: str = "leap", **agent_kwargs: Any) -> BenchMethod:
    """LEAP searching over drafters: MCTS on the joint (drafter option, layer configuration) space,
    4 real steps per trial, a choice that paid reused for up to 4 following prompts, and 4 more each time it holds up
    (carry_renew=0: searched again every fifth prompt); favourite_first=false: the agent draws every trial, not the
    memory's favourite first and the options it remembers above the leader next; abandon=0: every trial runs its four
    steps (by default one whose first two measured below half the best other option's reward stops); explore=0:
    options the memory does not know yet hold every request's search (by default they stop holding it once the
    request has tried 4 options); agent=NAME runs another registered agent on the same space"""
    from leap.search.drafter_space import DEFAULT_DRAFTERS

    agent_kwargs.setdefault("steps_per_trial", 4)
    agent_kwargs.setdefault("carry_over", 4)
    agent_kwargs.setdefault("carry_renew", True)
    return SearchMethod("leap-drafters", model, options, agent, drafters=drafters or DEFAULT_DRAFTERS,
                        **agent_kwargs)


def method_names() -> list[str]:
    """Every name :func:`make_method` accepts."""
    from leap.search.base import search_agents

    return sorted({*bench_methods.names(), *search_agents.names(), *drafters.names()})


def make_method(name: str, model: LeapModel, options: BenchOptions = BenchOptions(), **kwargs: Any) -> BenchMethod:
    """The benchmark method called ``name`` (see the module docstring for the lookup order)."""
    from leap.search.base import search_agents

    if name in bench_methods:
        return bench_methods.create(name, model, options, **kwargs)
    if name in search_agents:
        return SearchMethod(name, model, options, name, **kwargs)
    if name in drafters:  # config=... (compact or sparse form) gives layer-skip / hybrid their layers
        config = kwargs.pop("config", None)
        policy = kwargs.pop("policy", options.draft_policy)
        tree_verify = kwargs.pop("tree_verify", options.tree_verify)
        layer_config = LayerConfig.parse(str(config), model.num_layers) if config is not None else None
        if layer_config is None and name == "layer-skip":
            raise SettingsError("layer-skip needs a configuration: --method-arg layer-skip:config=skip=5-7")
        cap = _batch_cap(kwargs.pop("batch_cap", 16))
        batch_kw = dict(num_tokens=cap, screen=kwargs.pop("batch_screen", True),  # batch_cap=auto: BatchDecoder's
                        refresh=int(kwargs.pop("batch_refresh", 32)), reward=str(kwargs.pop("batch_reward", "mean")),
                        fresh_bar=bool(kwargs.pop("batch_fresh_bar", True)), batch_bar=_judge(kwargs.pop("batch_bar", False)))
        decoder = SelfSpecDecoder(model, layer_config, policy, drafter=name, drafter_kwargs=kwargs,
                                  tree_verify=tree_verify)
        batch = None
        if layer_config is None and batch_refusal(drafters.get(name)) is None:
            batch = BatchDecoder(model, name, drafter_kwargs=kwargs, **batch_kw)
        elif name == "layer-skip" and not layer_config.low and not kwargs:  # LEAP's layer draft, batched
            batch = BatchDecoder(model, layer_config=layer_config, **batch_kw)
        return DecoderMethod(name, decoder, batch)
    raise UnknownNameError(f"unknown benchmark method {name!r}; known: {', '.join(method_names())}")
