"""Batched decoding: B requests decoded together, each row exactly what decoding it alone gives (issue 37).

Plain decoding with B > 1 (left-padded prompts, one forward per step) is the baseline speculation has to beat
at B > 1; batched speculative decoding drafts one chain per row, verifies every row's ``[pending, d_1..d_k]``
in one forward, and accepts, commits and rolls back per row.

Layout (the invariant between steps): the cache is :class:`~leap.core.modeling.kv_cache.LeapKVCache` with one
batch row per request and *slots* shared by the rows. Row ``r`` has a validity mask over the slots
(:attr:`BatchState.valid`) and a logical position per slot; its valid slots hold exactly the keys and values
of its committed tokens except the last (pending) one, in order - the single-request invariant of
:class:`~leap.core.decoding.session.DecodingSession`, per row. A step appends ``q = 1 + max_r k_r`` slots
(rows with shorter drafts pad theirs, invalid); after verification row ``r`` keeps its first ``1 + a_r``
(pending and accepted drafts) and the slots after the longest keep are cropped, so a row that accepted less
than another leaves holes, masked out of every later attention (``-inf`` weight: the same softmax as without
them). Rotary positions are per row, so where a key sits does not matter. Rows that finish (EOS or their
budget) leave the batch at the end of the step (their cache rows are dropped).

Lossless: greedy rows are the argmax of the same model over the same keys as decoding alone; only the float
summation order of batched matrix products differs (float32: ~1e-6 relative), which the property tests hold
to token identity on random batches (``tests/core/decoding/test_batch.py``). Under sampling each row draws
with its own generator through the same speculative sampling rule as a single request.

Drafters: one instance per row, driven through the :class:`~leap.core.drafters.base.Drafter` lifecycle
(``begin``, ``propose`` or ``propose_sampled``, ``observe``, ``feedback``, ``finish``). Drafters that draft with
the model's layers (``uses_layers``, an ``exit_layer``), read the verifier's features (``needs_features``) or
branch (``tree_nodes > 1``) are refused with the reason: their batched forms are not built. LEAP's own layer draft is
batched (``layer_config``: a configuration of skipped and repeated layers): each depth runs one token a row through
the configuration's layers in one forward (:meth:`BatchState.draft_forward`, the rows' masks as verification's), and
the draft's cache entries are dropped before the verification forward runs every layer.

The chain cap per step is ``num_tokens`` (fixed), or chosen by :class:`~leap.core.policies.batch_caps.GoodputBandit`
(``num_tokens="auto"``) from the goodput measured on the batch itself, with 0 (plain batched decoding) among its arms:
speculation turns itself off where it loses. One bandit per number of rows still in the batch, kept across calls, so
later batches start from what earlier ones measured (with ``batch_bar``, plain's bar is each batch's). Given several
drafters (the drafter search at batch level: ``leap bench --batch-size B --methods leap-drafters``), every row holds
one of each and the bandit's arms are ``(drafter, cap)`` pairs: each step drafts every row with the arm's
drafter (the others still see every committed token when they next draft).

On a GPU the eager batch is launch-bound; ``graphs=True`` keeps the same layout on static buffers with each layer a
CUDA graph (:mod:`leap.core.modeling.graphs.batch`, :meth:`BatchDecoder.new_state`).

Who calls what: ``leap bench --batch-size B`` (:meth:`leap.bench.methods.BenchMethod.run_batch`) and library code call
:meth:`BatchDecoder.generate`, which steps a :class:`~leap.core.decoding.batch_session.BatchSession`
(:meth:`BatchDecoder.start`) with its cap policy; ``LeapBatchSpec-v0`` steps one with an agent's caps.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from leap.core.decoding.batch_session import BatchSession
from leap.core.decoding.batch_state import BatchOutcome, BatchRow, BatchState  # noqa: F401  (leap's batch API)
from leap.core.drafters import Drafter, make_drafter
from leap.core.errors import SettingsError
from leap.core.modeling.kv_cache import PromptKV
from leap.core.config import LayerConfig
from leap.core.modeling.layers import LayerStack, plan_for
from leap.core.modeling.model import LeapModel
from leap.core.policies.batch_bar import BatchBar
from leap.core.policies.batch_caps import FixedCap, GoodputBandit, drafter_arms
from leap.core.runtime.notices import say_once
from leap.core.verify.sampling import SamplingSettings

__all__ = ["BatchDecoder", "BatchOutcome", "BatchRow", "batch_refusal"]

_SAID: set[str] = set()


def batch_refusal(drafter: type[Drafter] | Drafter) -> str | None:
    """Why ``drafter`` cannot draft in a batch (None: it can), from what it declares on the base class."""
    if drafter.uses_layers or drafter.exit_layer is not None:
        return "it drafts with the model's own layers (a batch takes LEAP's layer draft as layer_config=...)"
    if drafter.needs_features:
        return "it reads the verifier's top-layer features (not passed per row yet)"
    if drafter.tree_nodes > 1:
        return "it drafts trees (batched verification takes chains)"
    return None


class BatchDecoder:
    """Decode several prompts together, greedy or sampled, plain or with a drafter per row.

    Args:
        model: the target model.
        layer_config: LEAP's layer draft instead of a drafter (its skip and repeat actions; ``low`` layers are not
            batched): every row drafts with that subset of the model's own layers, depth by depth in one forward.
        drafter: a registered drafter name or a :class:`~leap.core.drafters.base.Drafter` class (one instance is
            made per row with ``drafter_kwargs``), or None for plain batched decoding; or a list of
            ``(name or class, kwargs)`` pairs: one of each per row, chosen per step by the bandit
            (``num_tokens="auto"``) or the caller (:meth:`BatchSession.step`'s ``drafter``).
        num_tokens: the most draft tokens per row and step (the drafter's own setting still applies below it),
            or ``"auto"``: a :class:`~leap.core.policies.batch_caps.GoodputBandit` picks it per step among
            ``caps`` (0 included) by measured goodput.
        caps: the bandit's arms for ``num_tokens="auto"``.
        loss_budget: losing cheaply, per batch (``num_tokens="auto"``, 0 among ``caps``): what a batch's drafted steps
            may lose, as a share of its plain time, before the rest of it decodes plainly, with the batches after a
            streak of such batches skipped (:class:`~leap.core.policies.loss_budget.LossBudget`; a drafter's first
            drafting step in a batch, its setup, is neither measured nor a loss: :meth:`generate`). It runs until
            something pays (:meth:`~leap.core.policies.batch_caps.GoodputBandit.pays`, kept across batches with the
            bandit), then the bandit alone decides. None: off.
        judge_all_in: the bandit's word that something pays is not taken while the drafters not retired have lost,
            every cost counted (:attr:`tally`), to plain decoding; the loss budget then counts a switch's catching up
            too (:mod:`leap.core.policies.loss_budget`). A confidence in (0, 1): not taken until they have paid beyond
            the noise of their steps (:meth:`~leap.core.policies.loss_budget.DraftingTally.paid_among`). False: the
            bandit's word alone.
        reward: what a step is worth to the bandit, the budget and the tally (:attr:`BatchSession.worth
            <leap.core.decoding.batch_session.BatchSession.worth>`): ``"mean"``, its tokens a row, ``"progress"``, how
            far it moved the batch's laggard, or ``"slowest"``, its tokens a row scaled to the slowest row's rate.
        compact_min, compact_share: pack the rows' valid slots to the front once more than ``max(compact_min,
            compact_share * slots)`` slots are holes (attention over holes costs time; packing costs a copy of the
            cache); ``0, 0`` packs after every step that leaves a hole.
        screen: with ``num_tokens="auto"``, the bandit opens a drafter's untried caps by the cost model (the
            acceptance and drafting seconds its pulled caps measured, verification's cost per batch size from
            calibration: :func:`~leap.core.decoding.calibrate.batch_calibration_for`, measured on first use and
            cached) instead of by the ladder's rule, opening a cap only where it is predicted to beat plain decoding
            (True or ``"plain"``; ``"best"``: where it beats the best arm pulled so far:
            :class:`~leap.core.policies.batch_caps.GoodputBandit`'s ``bar``); False: the ladder alone (the ablation).
        switching: with several drafters, count a drafter's setup in a batch (its rows begun) in the bandit's choice:
            mid-batch only the drafters already begun explore (:meth:`~leap.core.policies.batch_caps.GoodputBandit.choose`).
            Off by default, as are ``screen="best"`` and ``first_step_setup``: together they did not pay.
        first_step_setup: a drafter's first drafting step in a batch is its setup, not measured (:meth:`generate`);
            ``"switch"``: for a drafter that keeps a context of its own
            (:attr:`~leap.core.drafters.base.Drafter.keeps_context`), its first step in a batch and its first after
            every step it did not draft, for the others none; off: measured like the others.
        refresh, fresh_bar: with ``num_tokens="auto"``, plain decoding measured again after this many steps without it
            (:class:`~leap.core.policies.batch_caps.GoodputBandit`'s; ``fresh_bar=False``: the ablation).
        batch_bar: with ``num_tokens="auto"``, each batch's own bar: True, a margin or False (:class:`BatchBar`'s).
        graphs: decode on static buffers with each layer a CUDA graph (:mod:`leap.core.modeling.graphs.batch`; off a
            GPU the same path without capture); None: ``LEAP_BATCH_GRAPHS=1`` turns it on (off until a GPU run has
            measured it); a sliding-window model decodes eagerly.
    """

    def __init__(self, model: LeapModel, drafter: str | type[Drafter] | None = None, *,
                 drafter_kwargs: dict | None = None, layer_config: LayerConfig | None = None,
                 num_tokens: int | str = 16, caps: Sequence[int] = (0, 2, 4, 8), compact_min: int = 64,
                 compact_share: float = 0.5, loss_budget: float | None = None, screen: bool | str = True,
                 switching: bool = False, first_step_setup: bool | str = False, refresh: int = 32,
                 fresh_bar: bool = True, judge_all_in: bool | float = True, reward: str = "mean",
                 graphs: bool | None = None, batch_bar: bool | float = False) -> None:
        from leap.core.drafters import drafters
        from leap.core.policies.loss_budget import DraftingTally, LossBudget

        self.model, self.stack = model, LayerStack(model)
        self.drafter, self.drafter_kwargs = drafter, dict(drafter_kwargs or {})
        #: LEAP's layer draft (skip/repeat per layer) as a plan, or None: every row drafts with the model's own layers
        self.layer_config, self.plan = layer_config, None
        if layer_config is not None:
            if drafter is not None:
                raise SettingsError("a batch drafts with a layer configuration or with drafters, not both")
            if len(layer_config.actions) != model.num_layers:
                raise SettingsError(f"the layer configuration has {len(layer_config.actions)} layers; "
                                    f"{model.name} has {model.num_layers}")
            if layer_config.low:
                raise SettingsError("low-precision layers (low=...) are not batched; use skip and repeat")
            self.plan = plan_for([a.passes for a in layer_config.actions])
        several = isinstance(drafter, (list, tuple))
        #: (drafter, kwargs) per drafter the rows hold (empty: plain batched decoding)
        self.specs = ([(d, dict(kw)) for d, kw in drafter] if several
                      else [(drafter, self.drafter_kwargs)] if drafter is not None else [])
        self._plain_arm = (0, 0) if len(self.specs) > 1 else 0  # the bandit's: arms are (drafter, cap) pairs then
        if several and not self.specs:
            raise SettingsError("a batch's list of drafters is empty; pass drafter=None for plain batched decoding")
        self.compact_min, self.compact_share = int(compact_min), float(compact_share)
        self._pools: list[list[Drafter]] = [[] for _ in self.specs]
        #: per drafter, which model state its rows hold: equal where they share one (:meth:`_twin`)
        self._state_group = list(range(len(self.specs)))
        self._policies: dict[int, Any] = {}  # rows in the batch -> its cap policy (FixedCap or GoodputBandit)
        for name, _ in self.specs:
            why = batch_refusal(drafters.get(name) if isinstance(name, str) else name)
            if why:
                raise SettingsError(f"drafter {name!r} cannot draft in a batch: {why}; use a model-free drafter "
                                    f"(prompt-lookup, suffix, token-recycling) or lowbit")
        if num_tokens != "auto" and (not isinstance(num_tokens, int) or num_tokens < 0):
            raise SettingsError(f"num_tokens must be a number of draft tokens >= 0 or 'auto', got {num_tokens!r}")
        self.num_tokens = num_tokens
        self.caps = tuple(int(c) for c in caps)
        if loss_budget is not None and (num_tokens != "auto" or 0 not in self.caps):
            raise SettingsError("loss_budget needs num_tokens='auto' with 0 (a plain step) among the caps")
        if screen not in (True, False, "best", "plain"):
            raise SettingsError(f"screen is true or plain (caps opened where the cost model beats plain decoding), "
                                f"best (where it beats the best arm) or false (the ladder alone), got {screen!r}")
        self.loss_budget, self.screen = loss_budget, bool(screen) and num_tokens == "auto"
        self.budget = LossBudget(loss_budget) if loss_budget is not None else None
        if not isinstance(judge_all_in, bool) and not 0 < float(judge_all_in) < 1:
            raise SettingsError(f"judge_all_in is true, false or a confidence in (0, 1), got {judge_all_in!r}")
        #: the run's drafting steps, every cost counted, against plain steps for their tokens (one a decoder)
        self.tally, self.judge_all_in, self.fresh_bar = DraftingTally(), judge_all_in, bool(fresh_bar)
        if reward not in ("mean", "progress", "slowest"):
            raise SettingsError(f"reward is mean (tokens a row), progress (the laggard's tokens) or slowest (tokens "
                                f"a row scaled to the slowest row's rate), got {reward!r}")
        self.reward, self.bar = reward, "best" if screen == "best" else "plain"  # the screen's bar (GoodputBandit's)
        if first_step_setup not in (True, False, "switch"):
            raise SettingsError(f"first_step_setup is true, false or switch, got {first_step_setup!r}")
        self.switching, self.first_step_setup, self.refresh = bool(switching), first_step_setup, int(refresh)
        self._costs = None  # the calibration the screen reads (:meth:`_batch_costs`)
        self.batch_bar = BatchBar(self._verify_cost, on=batch_bar)  # each batch's own bar (off: carried across)
        self.retired: frozenset[int] = frozenset()  #: drafters the caller has stopped (:meth:`retire`)
        self.graphs = (os.environ.get("LEAP_BATCH_GRAPHS", "0") == "1") if graphs is None else bool(graphs)
        self._engines: dict[int, Any] = {}  # rows -> BatchGraphs (:meth:`new_state`)

    def _rows(self, which: int, prompts: list[list[int]], settings: SamplingSettings, caches: Sequence) -> list[Drafter]:
        """Drafter ``which``'s rows for new requests: one instance per row, kept across calls (``begin`` starts each
        request afresh) and joined once (:meth:`Drafter.join_rows`: lowbit's rows share one llama.cpp context), then
        told the prompts together (:meth:`Drafter.begin_rows`)."""
        name, kwargs = self.specs[which]
        if len(self._pools[which]) < len(prompts):
            pool = [make_drafter(name, **kwargs) if isinstance(name, str) else name(**kwargs) for _ in prompts]
            twin = self._twin(which, pool[0], len(prompts))
            if twin is not None:  # row r takes over row r's state of a drafter with the same state (a llama.cpp sequence)
                for row, other in zip(pool, self._pools[twin]):
                    row.share_state(other.state_owner())
            self._state_group[which] = self._state_group[twin] if twin is not None else max(self._state_group) + 1
            type(pool[0]).join_rows(pool, self.model)  # what is not shared (lowbit: rows without a runner yet)
            self._pools[which] = pool
        rows = self._pools[which][: len(prompts)]
        for d in rows:
            if d.needs_costs:
                from leap.core.decoding.calibrate import calibration_for

                d.use_costs(calibration_for(self.model))
            if d.needs_model:
                d.use_model(self.model)
            d.use_sampling(settings)
        for d, p, cache in zip(rows, prompts, caches):
            if d.takes_prompt_kv and len(p) > 1:  # the row's own prefill (lowbit's KV handoff)
                d.use_prompt_kv(PromptKV(cache, len(p) - 1))
        type(rows[0]).begin_rows(rows, prompts)
        return rows

    def _twin(self, which: int, drafter: Drafter, rows: int) -> int | None:
        """Another drafter (its index) whose rows, at least ``rows`` of them, hold a model state ``drafter``'s may share
        (:meth:`Drafter.shared_state_key <leap.core.drafters.base.Drafter.shared_state_key>`: ``cascade`` and the
        ``lowbit`` options, one low-bit runner), as :class:`~leap.search.runner.OnlineSearch` shares them across a
        request's trials; None: none made yet. Apart, each caught its own llama.cpp context up on a switch (B = 8, Xeon:
        up to 1.4 s a switch in a 13 s batch, ``experiments/2026-11-28-batch-shared-runner``)."""
        key = drafter.shared_state_key()
        return None if key is None else next((w for w, pool in enumerate(self._pools) if w != which
                                              and len(pool) >= rows and pool[0].shared_state_key() == key), None)

    def kin(self, drafter: int) -> set[int]:
        """``drafter`` and those whose rows share its model state (:meth:`_twin`): no switch among them catches up."""
        return {d for d, group in enumerate(self._state_group) if group == self._state_group[drafter]}

    def new_state(self, rows: int, needed: int) -> BatchState:
        """A batch's cache for ``rows`` rows of up to ``needed`` tokens each: on static buffers with its layers replayed
        (``graphs``: one :class:`~leap.core.modeling.graphs.batch.BatchGraphs` per row count, made anew only for a
        batch that needs more slots), else leap's eager cache, as while another batch holds the buffers (said once)."""
        if not self.graphs or self.stack.window:
            return BatchState(self.stack, rows, needed)
        from leap.core.modeling.graphs.batch import ROOM, BatchGraphs, StaticBatchState
        from leap.core.modeling.graphs.engine import capacity_bucket

        capacity = capacity_bucket(needed + ROOM)
        engine = self._engines.get(rows)
        if engine is not None and not engine.free():
            say_once("leap: batch graphs: a second batch started while the first holds the buffers; it runs eagerly",
                     _SAID)
            return BatchState(self.stack, rows, needed)
        if engine is None or engine.capacity < capacity:
            engine = self._engines[rows] = BatchGraphs(self.stack, rows, capacity)
            engine.prepare()
        return StaticBatchState(self.stack, engine)

    def start(self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int = 128, temperature: float = 0.0,
              top_p: float = 1.0, seed: int = 0):
        """A :class:`~leap.core.decoding.batch_session.BatchSession`: the prompts prefilled and their rows' drafters
        joined, decoded one :meth:`~leap.core.decoding.batch_session.BatchSession.step` at a time with the chain
        cap the caller picks (``LeapBatchSpec-v0``'s agent, or :meth:`generate`'s cap policy)."""
        return BatchSession(self, prompts, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                            seed=seed)

    def policy(self, rows: int):
        """The chain-cap policy for a batch of ``rows`` rows still decoding, kept across calls: goodput depends on
        the rows in the batch, and what one batch measured is what the next one starts from (a run pays its
        exploration once); a row count met for the first time starts from the closest one's means
        (:meth:`~leap.core.policies.batch_caps.GoodputBandit.seeded`)."""
        if rows in self._policies:
            return self._policies[rows]
        if self.num_tokens != "auto":
            policy = FixedCap(int(self.num_tokens))
        elif self._policies:  # a new row count starts from what the closest one measured
            policy = self._policies[min(self._policies, key=lambda n: (abs(n - rows), n))].seeded(self._verify_cost(rows))
        else:
            policy = GoodputBandit(drafter_arms(len(self.specs), self.caps) if len(self.specs) > 1 else self.caps,
                                   verify_cost=self._verify_cost(rows), bar=self.bar, switching=self.switching,
                                   refresh=self.refresh, fresh_bar=self.fresh_bar)
            policy.retire(self.retired)
        self._policies[rows] = policy
        return policy

    def retire(self, drafters: set[int] | frozenset[int]) -> None:
        """Stop drafting with ``drafters`` (indices into the drafters given; the set replaces the last one): every
        bandit's arms of theirs close, now and in bandits made later (:meth:`GoodputBandit.retire
        <leap.core.policies.batch_caps.GoodputBandit.retire>`). :class:`~leap.search.batch.BatchSearch` calls it
        after each batch with the drafters its successive elimination has left out."""
        self.retired = frozenset(int(d) for d in drafters)
        for policy in self._policies.values():
            if isinstance(policy, GoodputBandit):
                policy.retire(self.retired)

    def forget(self) -> None:
        """Forget what the cap bandits, the loss budget's streak and the tally have measured (the drafters' rows and
        the calibration stay): ``leap bench`` calls it after its untimed warm-up
        (:meth:`leap.bench.methods.BenchMethod.after_warm_up`)."""
        self._policies.clear()
        self.retired = frozenset()
        self.tally.clear()
        if self.budget is not None:
            self.budget.forget()

    def goodput_over_plain(self, rows: int) -> dict[int, float]:
        """Each drafter's best goodput (over its caps) against plain decoding's, as the bandit of ``rows`` rows has
        measured them so far (drafter index -> ratio; empty without a bandit or a measured plain step): what
        :class:`~leap.search.batch.BatchSearch` teaches its memory after a batch."""
        policy = self._policies.get(rows)
        means = policy.means() if isinstance(policy, GoodputBandit) else {}
        arms = {(arm if isinstance(arm, tuple) else (0, arm)): value for arm, value in means.items()}
        plain = next((v for (_, cap), v in arms.items() if cap == 0), None)
        if not plain:
            return {}
        best: dict[int, float] = {}
        for (drafter, cap), value in arms.items():
            if cap:
                best[drafter] = max(best.get(drafter, 0.0), value / plain)
        return best

    def _verify_cost(self, rows: int):
        """``q ->`` a verification over ``q`` tokens a row at ``rows`` rows, in the calibration's units (None without
        the screen); batch sizes are measured once, on first use (2, 4 and 8 rows, and more where a batch is larger),
        and interpolated between."""
        if not self.screen:
            return None
        costs = self._batch_costs(rows)
        return lambda q: costs.verify_rows(rows, q)

    def _batch_costs(self, rows: int):
        """The calibration with batched verification measured up to ``rows`` rows (:meth:`generate` asks before its
        session starts, so a first use measures before the batch's clock runs, never inside it)."""
        from leap.core.decoding.calibrate import batch_calibration_for

        sizes = {2, 4, 8} | ({rows} if rows > 8 else set())
        if self._costs is None or not sizes <= set(self._costs.batch_curves):  # read (or measured) once, then held
            self._costs = batch_calibration_for(self.model, sorted(sizes))
        return self._costs

    def generate(self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int = 128, temperature: float = 0.0,
                 top_p: float = 1.0, seed: int = 0) -> BatchOutcome:
        """Decode every prompt to EOS or ``max_new_tokens``; row ``r`` samples with seed ``seed + r``."""
        if self.screen:
            self._batch_costs(len(prompts))  # measured now on a first use, not inside the batch's clock
        session = self.start(prompts, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed)
        budget, plain_arm = self.budget, self._plain_arm
        off = budget is not None and budget.begin(max_new_tokens)  # a batch to skip: no drafting now
        in_play = set(range(len(self.specs))) - self.retired
        all_in_lost = self.judge_all_in is not False and not self.tally.paid_among(  # not paid, all in (Args)
            in_play, None if self.judge_all_in is True else self.judge_all_in)
        self.batch_bar.begin(self.tally.speedup_among(in_play))
        previous: int | None = None  # the drafter of the last step, None after a plain one
        drafted: set[int] = set()  # drafters whose first drafting step in this batch is behind it
        while not session.done:
            rows = len(session.active)
            policy = self.policy(rows)
            self.batch_bar.prepare(policy, rows)  # the bar of this batch (batch_bar)
            begun = {d for d, rows_of in enumerate(session.drafter_sets) if rows_of is not None}
            arm = plain_arm if off else policy.choose(begun)
            drafter, cap = arm if isinstance(arm, tuple) else (0, arm)  # (drafter, cap) with several drafters
            committed, seconds = session.step(cap, drafter)
            # first_step_setup: a drafter's first drafting step in a batch is its setup, not measured - its rows
            # (BatchSession.begin_s) and its prompts taken in (lowbit: 0.49 s against 0.30 s for its next step,
            # docs/data/batch_first_step.json); "switch": for a drafter that keeps a context, also its first step after
            # each step it did not draft, where it takes in every token since (experiments/2026-11-27-batch-elimination)
            if self.first_step_setup == "switch":  # after a drafter sharing its state (lowbit, cascade): no switch
                setup = cap > 0 and session.drafters[0].keeps_context and (
                    previous is None or self._state_group[previous] != self._state_group[drafter])
            else:
                setup = self.first_step_setup and cap > 0 and drafter not in drafted
            first = cap > 0 and drafter not in drafted  # its rows begun, its prompts taken in: once a batch
            drafted |= {drafter} if cap else set()
            previous = drafter if cap else None
            # goodput (``reward``) over the seconds without the drafter's rows begun (paid once a batch), budget too
            gain = session.worth
            if not setup:
                policy.update(arm, gain, seconds - session.begin_s, accepted=session.accepted / rows,
                              draft_s=session.draft_s)
            if budget is not None and not (setup and (first or not all_in_lost)):  # all in: a switch is a loss
                off = budget.step(seconds - session.begin_s, gain, policy.means().get(plain_arm),
                                  pays=policy.pays() and not all_in_lost)
        if budget is not None:
            budget.end()
        out = session.outcome()
        self.tally.add(out, self.plain_rate)  # each step at its worth (``reward``)
        return out

    def plain_rate(self, rows: int) -> float | None:
        """A plain step's tokens a row a second at ``rows`` rows, as that row count's bandit measured it (None: not
        measured, or no bandit): :attr:`tally`'s yardstick."""
        policy = self._policies.get(rows)
        return policy.means().get(self._plain_arm) if isinstance(policy, GoodputBandit) else None
