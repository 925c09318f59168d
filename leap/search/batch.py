"""The drafter search at batch level (issue 37): one goodput bandit over (drafter, chain cap) arms for a run's batches.

Every row holds one instance of each batchable drafter option (:func:`~leap.search.drafter_space.batch_options`: one
per drafter, since a batch's chain length is the bandit's cap, not the option's setting), and
:class:`~leap.core.policies.batch_caps.GoodputBandit` picks per step whether, how far and with what to draft, plain
batched decoding among its arms, kept across the run's batches (:class:`~leap.core.decoding.batch.BatchDecoder` with
a list of drafters and ``num_tokens="auto"``).

With a :class:`~leap.search.memory.SearchMemory`, batches are a condition of their own (its "batch" set; at T > 0
"sampled-batch"): before the first batch of each, the drafters it remembers losing *in batches* are left out and the
best-remembered come first (:meth:`~leap.search.memory.SearchMemory.rank_drafters`), so the bandit tries them first;
after each batch, each drafter's best goodput over plain's, as the bandit measured it, is what the memory learns
(:meth:`~leap.search.memory.SearchMemory.observe_batch`). What a single request measured is never read here.

**A switch is not an arm's cost** (``first_step_setup="switch"``): a drafter that keeps a context (``lowbit``'s
llama.cpp cache) takes in, when it next drafts, every token committed since it last did; the bandit leaves that step
unmeasured, or a search that tries each drafter in turn judges ``lowbit`` by its catching up - at B = 8 on Spec-Bench
the search from an empty memory never drafted with it again (``docs/data/regret-3887562/b8-t0``).

**Successive elimination within the run** (``prune``, default 1.0): after each batch, the drafters still drafting
whose best goodput so far, as the bandit measured it, is below ``prune`` times the best such drafter's stop drafting
for the rest of the run (:meth:`~leap.core.decoding.batch.BatchDecoder.retire`); drafters not yet measured stay. A
retired drafter does not come back: its value, no longer measured, is not compared with those that go on being
measured (on Spec-Bench at B = 8, letting it back made ``lowbit`` and ``cascade`` take turns, batch by batch, as each
one's value fell below the other's frozen one). At the default only the best drafter drafts after the first batch:
switching between drafters that keep a context (``lowbit``, ``cascade``) costs each the tokens it missed, so two
near-equal drafters alternating lose to either one alone - on leap's seed prompts at B = 8 the search that kept both
took 20-26 s a batch against ``lowbit-auto``'s 15-17 s for about as many steps
(``experiments/2026-11-27-batch-elimination``). Successive elimination (Even-Dar, Mannor and Mansour 2006) with one
batch as its round; None: off. The best drafter's kin (:meth:`~leap.core.decoding.batch.BatchDecoder.kin`: ``lowbit``
and ``cascade`` share one low-bit runner a row, so switching between them costs nothing) are not judged by the
bandit's values - which of the two is ahead by them after one batch is noise (on the Xeon at B = 8 their first-batch
goodputs were a few percent apart, and the one kept - ``cascade`` - ran 0.74-1.02 of plain decoding in the batches
after, where ``lowbit-auto`` ran 0.92-1.07: ``docs/data/regret-xeon-e00c909/b8-t0``) - but by their steps all in
(``kin_all_in``, default on: :meth:`~leap.core.policies.loss_budget.DraftingTally.speedup`, fair among kin, as no
switch among them is left out): those below ``prune`` times the best such stop drafting. Kept together, the two
alternated at B = 4, ``cascade``'s steps giving less than ``lowbit``'s all in on 6 of the 7 seed batches where both
drafted, and the search from an empty memory ran behind ``lowbit-auto`` (``experiments/2026-11-29-all-in-budget``).
*Below* means below beyond the noise of their steps (``kin_confidence``, default 0.95:
:meth:`~leap.core.policies.loss_budget.DraftingTally.below`); until it is, both draft on, and their tally grows with
every batch. They are compared row count by row count (``kin_by_rows``, default on): a step at a batch's tail, once
rows have finished, gives far more over plain decoding than one at full rows, and which kin drafts the tail is the
bandit's pick, so pooled over rows the kin with more tail steps read ahead - from an empty memory at B = 4 and T = 1 the
search stopped ``lowbit`` for ``cascade`` after its second or third batch in three runs of three, ``cascade`` ahead
pooled and behind at four rows (``experiments/2026-12-07-kin-by-rows``). Judged by the point estimates of one batch's
9-16 steps each, which of the two went on at B = 4 and T = 1 was a coin's toss - ``lowbit`` in one run, ``cascade``
in the next, its steps' goodput 0.90 of ``lowbit-auto``'s for the rest of the run
(``docs/data/regret-amd-2775806/b4-t1``, ``docs/data/regret-amd-a4d3b97/b4-t1``; ``experiments/2026-12-02-kin-noise``).

**The prior's word is not final** (``rejoin``, default on): the drafters a memory leaves out *on the shipped prior's
word alone* (:meth:`~leap.search.memory.SearchMemory.learnt_elsewhere`: never measured on this machine) are not dropped
but held - in the decoder, their arms closed - and they join the search for the rest of the run once drafting has not
paid here: the drafting steps of the condition's batches so far, *every cost counted* (a drafter's rows begun, its
catching up after steps it did not draft), took longer than plain steps would have for the tokens they committed a row
(the decoder's :attr:`~leap.core.decoding.batch.BatchDecoder.tally`, :mod:`leap.core.policies.loss_budget`). The
prior's batch set comes from another machine and another row count (an AMD EPYC at B = 4: ``lowbit`` 1.90, the rest
1.17 and below), so from it the search at B = 8 on an Intel Xeon drafted with
``lowbit`` alone at 0.99 of plain decoding and never tried ``suffix``, the best fixed drafter there
(``docs/data/regret-xeon-e8d8e4b/b8-t0``). The bandit's own values leave a switch's catching up out (above), so they
cannot say this: with ``lowbit`` measured above plain by them, its batches of 8 ran at 0.84 to 1.09 of plain decoding
and the held drafters never joined; joining once ``lowbit`` fell short of 0.85 of the prior's 1.90 spent a batch
exploring at B = 4, where it paid about 1.2 times plain decoding (``experiments/2026-11-29-prior-rejoin``). Held
drafters cost nothing until they join (a batch makes a drafter's rows only when it first drafts).

**Drafting that loses all in can be given up like drafting that loses** (``judge_all_in``, on by default): the same
tally decides whether the loss budget (``loss_budget``) still runs - the bandit's word that an arm pays is not taken
while the tally says the drafters still in play have lost, and the budget then counts a switch's catching up too, so
a run in which no drafter pays on this machine and row count decodes plainly but for a few exploring batches, spaced
further apart after
every one that loses (:class:`~leap.core.policies.loss_budget.LossBudget`). Before it, at B = 8 on the Xeon the bandit
valued ``cascade`` and ``lowbit`` above plain decoding, the budget stopped, and the search ran at 0.81 to 1.10 of plain
decoding a batch, 0.94 over the run, where plain decoding was the best fixed choice
(``docs/data/regret-xeon-eb5bb92/b8-t0``); with it, 1.00 from the prior and 0.98 from an empty memory
(``docs/data/regret-xeon-492659e/b8-t0``). Judging the run's whole tally, at B = 4 and T = 1 where ``lowbit`` paid,
the search fell to 0.92 of ``lowbit-auto`` (``experiments/2026-11-29-all-in-budget``): the first batch's exploring
can hold the run's tally below plain decoding for batches after the drafter kept pays. Judged over the drafters in play
it was level there on leap's seed prompts and lifted B = 8 from the prior from 0.89 to 0.97 of plain decoding
(``experiments/2026-11-29-all-in-in-play``).

Who calls what: ``leap bench --batch-size B``'s ``leap-drafters`` (:meth:`leap.bench.methods.SearchMethod.run_batch`)
calls :meth:`BatchSearch.generate` once a batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from leap.core.decoding.batch import BatchDecoder, BatchOutcome
from leap.core.drafters import drafters
from leap.core.errors import SettingsError
from leap.core.modeling.model import LeapModel
from leap.search.drafter_space import batch_options
from leap.search.memory import SearchMemory

__all__ = ["BatchSearch"]


class BatchSearch:
    """A run's drafter search over batches (module docstring).

    Args:
        model: the target model.
        options: drafter options (labels such as ``"lowbit"`` or ``"suffix:min_prob=0.1"``); those that cannot batch
            are left out.
        memory: what earlier runs' batches measured (its "batch" set), read before the first batch and taught after
            each; None: off.
        caps, loss_budget, screen, switching, first_step_setup, refresh, fresh_bar, batch_bar, judge_all_in, reward:
            :class:`~leap.core.decoding.batch.BatchDecoder`'s (here
            ``first_step_setup="switch"`` by default: a drafter's catching up after steps it did not draft is not
            judged as its arm's own cost, module docstring; and ``batch_bar=0.2``: each batch's own bar while the
            run's drafting has not led plain decoding by a fifth, :mod:`leap.core.policies.batch_bar`).
        prune: after each batch, drafters below ``prune`` times the best's measured goodput stop drafting for the rest
            of the run (module docstring); None: off.
        rejoin: the drafters the memory leaves out on the prior's word alone are held, and join once drafting, every
            cost counted, has not paid (module docstring); False: left out for the run (the ablation).
        kin_all_in: the best drafter's kin are pruned by their steps all in (module docstring); False: all stay.
        kin_confidence: how sure the tally must be that a kin is below ``prune`` times the best before it stops
            drafting (module docstring); None or False: the point estimates decide (the ablation).
        kin_by_rows: with ``kin_confidence``, the kin are compared row count by row count (module docstring);
            False: their steps pooled over row counts (the ablation).
    """

    def __init__(self, model: LeapModel, options: Sequence[str], *, memory: SearchMemory | None = None,
                 caps: Sequence[int] = (0, 2, 4, 8, 16), loss_budget: float | None = None,
                 screen: bool | str = True, switching: bool = False, first_step_setup: bool | str = "switch",
                 prune: float | None = 1.0, refresh: int = 32, rejoin: bool = True, judge_all_in: bool | float = True,
                 kin_all_in: bool = True, reward: str = "mean", fresh_bar: bool = True,
                 kin_confidence: float | bool | None = 0.95, batch_bar: bool | float = 0.2,
                 kin_by_rows: bool = True) -> None:
        if prune is not None and not 0 < prune <= 1:
            raise SettingsError(f"prune is a share of the best drafter's goodput in (0, 1], or None (off), got {prune}")
        self.model, self.memory, self.prune, self.rejoin = model, memory, prune, bool(rejoin)
        self.options = batch_options(options, model)
        self.caps, self.loss_budget, self.screen = tuple(int(c) for c in caps), loss_budget, screen
        self.switching, self.first_step_setup, self.refresh = switching, first_step_setup, int(refresh)
        self.fresh_bar, self.batch_bar = bool(fresh_bar), batch_bar
        self.judge_all_in, self.kin_all_in, self.reward = judge_all_in, bool(kin_all_in), reward
        self.kin_by_rows = bool(kin_by_rows)
        if kin_confidence is False or kin_confidence is None:  # the bench's false
            self.kin_confidence = None
        elif 0 < float(kin_confidence) < 1:
            self.kin_confidence = float(kin_confidence)
        else:
            raise SettingsError(f"kin_confidence is a probability in (0, 1), or None (point estimates), got "
                                f"{kin_confidence!r}")
        self.decoder: BatchDecoder | None = None  # the batch's, made at the first batch of its condition (below)
        self.labels: list[str] = []  # the decoder's drafters, in its order
        #: one decoder (and its labels) per condition of the memory ("batch", "sampled-batch"; "" without a memory),
        #: each made once the memory has ranked the options for it: a run warmed up at T = 0 kept the greedy ranking
        #: for its sampled batches
        self.decoders: dict[str, tuple[BatchDecoder, list[str]]] = {}
        #: per condition, the drafters (decoder indices) held on the prior's word as the decoder was made, and those
        #: still held (empty once they joined)
        self.held_at_start: dict[str, frozenset[int]] = {}
        self.held: dict[str, frozenset[int]] = {}
        self._condition = ""

    def _start(self, rows: int, prompt_tokens: int, temperature: float) -> None:
        memory = self.memory
        condition = "" if memory is None else memory.condition(prompt_tokens, rows=rows, temperature=temperature)
        if condition not in self.decoders:
            options, held = self.options, ()
            if memory is not None:
                options = memory.rank_drafters(options, {o.label: drafters.get(o.name).fingerprint(
                    self.model, **o.kwargs) for o in options})
                kept = {o.label for o in options}
                held = tuple(o for o in self.options if self.rejoin and o.label not in kept
                             and _on_prior_alone(memory, o.name))
            decoder = BatchDecoder(self.model, [(o.name, o.kwargs) for o in (*options, *held)], num_tokens="auto",
                                   caps=self.caps, loss_budget=self.loss_budget, screen=self.screen,
                                   switching=self.switching, first_step_setup=self.first_step_setup,
                                   refresh=self.refresh, fresh_bar=self.fresh_bar, judge_all_in=self.judge_all_in,
                                   reward=self.reward, batch_bar=self.batch_bar)
            self.decoders[condition] = decoder, [o.label for o in (*options, *held)]
            self.held_at_start[condition] = self.held[condition] = frozenset(
                range(len(options), len(options) + len(held)))
            decoder.retire(self.held[condition])
        self.decoder, self.labels = self.decoders[condition]
        self._condition = condition

    def generate(self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int = 128, temperature: float = 0.0,
                 seed: int = 0) -> BatchOutcome:
        """Decode one batch (:meth:`~leap.core.decoding.batch.BatchDecoder.generate`) and teach the memory what
        its bandit has measured so far."""
        if not self.options:
            raise SettingsError("none of the drafter options can draft in a batch (see BatchSearch.options); decode "
                                "the batch plainly (BatchDecoder(model)) or name a batchable drafter (lowbit, suffix)")
        self._start(len(prompts), max(len(p) for p in prompts), temperature)
        out = self.decoder.generate(prompts, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
        measured = self.decoder.goodput_over_plain(len(prompts))
        if self.memory is not None and measured:
            self.memory.condition(max(len(p) for p in prompts), rows=len(prompts), temperature=temperature)
            self.memory.observe_batch({self.labels[d]: ratio for d, ratio in measured.items()})
        self._rejoin()
        active = {d: ratio for d, ratio in measured.items() if d not in self.decoder.retired}
        if self.prune is not None and active:  # a retired drafter's value is frozen: compared no more, never back
            best = max(active.values())
            kin = self.decoder.kin(max(active, key=active.get)) - self.decoder.retired  # sharing the best's state
            kept = self._kin_kept(kin)
            self.decoder.retire(self.decoder.retired | (kin - kept) | {
                d for d, ratio in active.items() if ratio < self.prune * best and d not in kin})
        return out

    def _kin_kept(self, kin: set[int]) -> set[int]:
        """Which of the best drafter's kin go on drafting: with ``kin_all_in``, those whose steps so far, all in
        (:meth:`~leap.core.policies.loss_budget.DraftingTally.speedup`: no switch among kin to leave out), are not
        below ``prune`` times the best such (with ``kin_confidence``: beyond their noise); kin not yet counted stay
        (module docstring)."""
        tally = self.decoder.tally
        speedups = {d: tally.speedup(d) for d in kin} if self.kin_all_in else {}
        measured = {d: s for d, s in speedups.items() if s}
        if len(measured) < 2:
            return kin
        top = max(measured, key=measured.get)
        if self.kin_confidence is None:  # the ablation: the point estimates decide
            return {d for d in kin if d not in measured or measured[d] >= self.prune * measured[top]}
        if not self.kin_by_rows:
            return {d for d in kin if not tally.below(d, top, self.prune, self.kin_confidence)}
        return {d for d in kin if not any(tally.below(d, other, self.prune, self.kin_confidence, by_rows=True)
                                          for other in measured if other != d)}

    def _rejoin(self) -> None:
        """After a batch: once the decoder's tally of the run's drafting steps, every cost counted
        (:attr:`~leap.core.decoding.batch.BatchDecoder.tally`), says they took longer than plain steps would have for
        their tokens, the drafters held on the prior's word join for the rest of the run (module docstring)."""
        held = self.held.get(self._condition)
        if held and self.decoder.tally.lost:
            self.held[self._condition] = frozenset()
            self.decoder.retire(self.decoder.retired - held)

    def warm(self, prompts: Sequence[Sequence[int]], *, temperature: float = 0.0, seed: int = 0) -> None:
        """Pay every drafter's one-time costs on ``prompts`` outside any clock: the decoder of their condition takes one
        drafting step with each of its drafters, held ones included, so that its rows are made and begun once (a
        low-bit runner loads its model file and makes its context: 0.94 s for a batch of 8 on the 2-core AMD EPYC, where
        later batches begin the same rows in 0.14 to 0.23 s, ``experiments/2026-11-29-all-in-in-play/warm_probe.py``).
        Nothing is measured - the steps bypass the bandit, the budget and the
        tally. ``leap bench`` calls it after its untimed warm-up
        (:meth:`leap.bench.methods.SearchMethod.after_warm_up`), whose own batches draft only with the drafters their
        bandit picks: the search's first timed batch paid the rest, where a fixed drafter's loaded in the warm-up."""
        if not self.options:
            return
        self._start(len(prompts), max(len(p) for p in prompts), temperature)
        session = self.decoder.start(prompts, max_new_tokens=2 * len(self.labels) + 2, temperature=temperature,
                                     seed=seed)
        for drafter in range(len(self.labels)):
            if not session.done:
                session.step(1, drafter)

    def forget(self) -> None:
        """Forget what the batches so far measured (the decoder's bandits; the memory is its owner's to reset), the
        drafters held on the prior's word held again: ``leap bench`` calls it after its untimed warm-up
        (:meth:`leap.bench.methods.BenchMethod.after_warm_up`)."""
        for condition, (decoder, _) in self.decoders.items():
            decoder.forget()
            self.held[condition] = self.held_at_start[condition]
            decoder.retire(self.held[condition])


def _on_prior_alone(memory: SearchMemory, name: str) -> bool:
    """Whether every mean ``memory`` keeps for drafter ``name`` (any of its settings) is the shipped prior's alone."""
    labels = [label for label in memory.stats if label.split(":", 1)[0] == name]
    return bool(labels) and all(memory.learnt_elsewhere(label) for label in labels)
