"""One call of batched decoding, one step at a time (issue 37): what :meth:`BatchDecoder.generate` loops over, and what
``LeapBatchSpec-v0`` (:mod:`leap.envs.batch_search`) hands to an agent, which picks each step's chain cap.

A :class:`BatchSession` holds the batch's state between steps (the layout and the lossless argument are in
:mod:`leap.core.decoding.batch`): the prompts are prefilled and the rows' drafters joined when it is made; each
:meth:`BatchSession.step` drafts every active row's chain up to the cap it is given (0: no draft, a plain batched
step), verifies all rows in one forward, accepts, commits and rolls back per row, and drops the rows that finished.
Every step runs under ``torch.inference_mode`` (the cache is made there).

Who calls what: :meth:`leap.core.decoding.batch.BatchDecoder.start` makes one; :meth:`BatchDecoder.generate` and
:class:`leap.envs.batch_search.LeapBatchSpecEnv` call :meth:`step` until :attr:`done`, then :meth:`outcome`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from leap.core.decoding.batch_state import BatchOutcome, BatchRow, BatchState
from leap.core.decoding.step_draft import StepDraft, commit_cut
from leap.core.errors import ContextLengthError, SettingsError
from leap.core.verify.sampling import SamplingSettings, greedy_accept_rows, sample, speculative_accept, target_probs

__all__ = ["BatchSession"]


class BatchSession:
    """B prompts decoded together, one step per :meth:`step` (see the module docstring); ``decoder`` is the
    :class:`~leap.core.decoding.batch.BatchDecoder` that made it (its model, stack, drafters, packing settings and
    ``reward``: what :attr:`worth` says a step was worth)."""

    #: pseudo-steps at a drafter's mean rate each row's own rate is shrunk with (:meth:`slowest_share`): a row's
    #: first steps say little (at T = 1 the rows' rates under one drafter spread by chance over a few steps)
    SLOWEST_PRIOR_STEPS = 8

    def __init__(self, decoder: Any, prompts: Sequence[Sequence[int]], *, max_new_tokens: int = 128,
                 temperature: float = 0.0, top_p: float = 1.0, seed: int = 0) -> None:
        prompts = [[int(t) for t in p] for p in prompts]
        model = decoder.model
        if not prompts or any(not p for p in prompts):
            raise SettingsError("every prompt of a batch needs at least one token")
        if int(max_new_tokens) < 1:
            raise SettingsError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        longest = max(len(p) for p in prompts)
        if longest + max_new_tokens > model.max_context:
            raise ContextLengthError(f"a prompt of {longest} tokens and {max_new_tokens} new tokens exceed "
                                     f"{model.name}'s {model.max_context}; shorten it or lower --max-new-tokens")
        self.decoder, self.model, self.stack = decoder, model, decoder.stack
        self.max_new_tokens = int(max_new_tokens)
        self.settings = SamplingSettings(temperature, top_p)
        self.eos = model.eos_token_ids
        self.t0 = time.perf_counter()
        self.batch_size = len(prompts)
        self.rows = [BatchRow() for _ in prompts]
        self.tokens = [list(p) for p in prompts]
        self.generators = []
        for r in range(self.batch_size):
            g = torch.Generator(device=model.device)
            g.manual_seed(int(seed) + r)
            self.generators.append(g)
        self.state = decoder.new_state(self.batch_size, longest + max_new_tokens)
        with torch.inference_mode():
            caches = self.state.prefill(prompts)  # every prompt but its last token (pending)
            # [drafter][row], each drafter's rows made and begun when a step first drafts with it (with several
            # drafters, a batch pays for - the KV handoff of every row, a llama.cpp context - only the ones it uses)
            self._begin = (prompts, caches)
            self.drafter_sets: list[list | None] = [None] * len(decoder.specs)
            self.drafters = self._rows(0) if len(decoder.specs) == 1 else None  # the drafter each step drafts with
        self.prefill_s = time.perf_counter() - self.t0
        self.active = list(range(self.batch_size))  # request index of each batch row still decoding
        self.caps: list[int] = []  # the cap of every step taken
        #: every step's rows, tokens committed, seconds, progress and worth (:attr:`progress`, :attr:`worth`;
        #: :meth:`outcome`)
        self.steps: list[tuple[int, int, float, int, float]] = []
        #: the last step's progress: how far it moved the batch's laggard, the fewest tokens any of its rows had
        #: committed (the rows it stepped, before and after it). A batch without refills ends with its last row, so
        #: tokens a step gives rows ahead of the laggard do not shorten it: a copying drafter that commits nine
        #: tokens in one row and one in seven others commits two a row but moves the batch on by one, as a plain
        #: step does (measured at B = 8: 1.5 tokens a row a drafting step, 1.0 to 1.1 in its worst row;
        #: ``experiments/2026-11-29-all-in-in-play``). What :class:`BatchDecoder`'s ``reward="progress"`` rewards
        self.progress = 0
        #: what the last step was worth to the decoder's bandit, budget and tally, by its ``reward``: tokens a row
        #: (``"mean"``), :attr:`progress`, or tokens a row times :meth:`slowest_share` for a drafting step
        #: (``"slowest"``); a plain step's is one a row either way
        self.worth = 0.0
        #: per drafter, per request: the tokens its drafting steps committed to the row and how many there were
        #: (kept with ``reward="slowest"`` alone: nothing else reads them)
        self.row_rates: dict[int, dict[int, list[int]]] = {}
        self.drafter_choices: list[int] = []  # the drafter (index in the decoder's list) of every step taken
        #: seconds the last :meth:`step` spent making and beginning a drafter's rows (its first step with that
        #: drafter in this batch): part of the step's wall time, paid once per batch, so a cap policy rewards the
        #: step without it (a drafter whose rows cost a llama.cpp context to begin is not judged by that one step)
        self.begin_s = 0.0
        #: the last step's drafting seconds (every row's chain) and draft tokens accepted over all rows: what a cap
        #: policy's cost-model screen reads (:class:`~leap.core.policies.batch_caps.GoodputBandit`'s ``verify_cost``)
        self.draft_s, self.accepted = 0.0, 0
        self.width = 1  #: the last step's verification width: tokens a row it verified (1 + the longest chain)

    def _rows(self, which: int) -> list:
        """Drafter ``which``'s rows, made and begun on the prompts now if this batch has not drafted with it yet."""
        if self.drafter_sets[which] is None:
            prompts, caches = self._begin
            self.drafter_sets[which] = self.decoder._rows(which, prompts, self.settings, caches)
            if all(held is not None for held in self.drafter_sets):
                self._begin = None  # every drafter begun: the rows' prefill caches are not held any longer
        return self.drafter_sets[which]

    def slowest_share(self, drafter: int, prior_steps: float) -> float:
        """How the slowest row still decoding fares under ``drafter`` against its rows' mean, in this batch: each
        active row's tokens a drafting step of ``drafter`` (shrunk toward the mean of every row it drafted by
        ``prior_steps`` pseudo-steps at that mean, so that a row's few steps do not decide) over that mean, the least
        of them, at most 1 (1: not drafted yet). A batch without refills ends with its last row: a copying drafter
        that runs some rows ahead and leaves the others at a token a step does not bring that end closer
        (:class:`~leap.core.decoding.batch.BatchDecoder`'s ``reward="slowest"``)."""
        rates = self.row_rates.get(drafter, {})
        steps = sum(n for _, n in rates.values())
        if not steps:
            return 1.0
        mean = sum(t for t, _ in rates.values()) / steps
        active = [rates[r] for r in self.active if r in rates]
        if not active or mean <= 0:
            return 1.0
        return min(1.0, min((t + prior_steps * mean) / (n + prior_steps) for t, n in active) / mean)

    @property
    def done(self) -> bool:
        return not self.active

    def _draft(self, cap: int) -> list[StepDraft]:
        """Every active row's chain, at most ``cap`` tokens and the row's room left."""
        model, settings, rows, tokens = self.model, self.settings, self.rows, self.tokens
        drafts = [StepDraft(t_start=None) for _ in self.active]
        rooms = [min(cap, self.max_new_tokens - len(rows[r].token_ids) - 1) for r in self.active]
        if self.decoder.plan is not None:
            return self._draft_layers(drafts, rooms)
        drafters = self.drafters
        if drafters is not None and settings.greedy:  # every row's chain, together where the drafter can
            chains = type(drafters[0]).propose_rows([drafters[r] for r in self.active],
                                                    [tokens[r] for r in self.active], [max(room, 0) for room in rooms])
            for draft, chain, room in zip(drafts, chains, rooms):
                draft.take_free(chain[:max(room, 0)], None, self.eos)
        elif drafters is not None and drafters[self.active[0]].samples_drafts:  # the rows' draws, together if it can
            drawn_rows = type(drafters[self.active[0]]).propose_sampled_rows(
                [drafters[r] for r in self.active], [tokens[r] for r in self.active], [max(room, 0) for room in rooms],
                [self.generators[r] for r in self.active])
            for draft, drawn, room in zip(drafts, drawn_rows, rooms):
                if room > 0:
                    drawn = drawn[:room]
                    draft.take_free([t for t, _ in drawn], [q for _, q in drawn], self.eos,
                                    (model.vocab_size, model.device))
        elif drafters is not None:
            for draft, r, room in zip(drafts, self.active, rooms):
                if room > 0:
                    draft.take_free(drafters[r].propose(tokens[r], room)[:room], None, self.eos,
                                    (model.vocab_size, model.device))
        return drafts

    def _draft_layers(self, drafts: list[StepDraft], rooms: list[int]) -> list[StepDraft]:
        """LEAP's layer draft for every row at once: depth by depth, one token a row through the configuration's
        layers (:meth:`BatchState.draft_forward`), greedy or drawn with the row's own generator, until the longest
        row's room; each row keeps its first ``room`` tokens (and their draft distributions under sampling). The
        draft's cache entries are dropped before verification, which runs every layer over the chains."""
        model, settings, state, tokens = self.model, self.settings, self.state, self.tokens
        depth = max(rooms)
        if depth <= 0:
            return drafts
        dev = model.device
        feed = torch.tensor([[tokens[r][-1]] for r in self.active], device=dev)
        base = torch.tensor([len(tokens[r]) - 1 for r in self.active], device=dev)[:, None]
        chains: list[list[int]] = [[] for _ in self.active]
        q_rows: list[list[torch.Tensor]] = [[] for _ in self.active]
        for d in range(depth):
            hidden = state.draft_forward(self.decoder.plan, feed, base + torch.arange(d + 1, device=dev)[None])
            logits = self.stack.model.lm_head(self.stack.model.norm(hidden[:, -1])).float()  # [B, V]
            if settings.greedy:
                picked = logits.argmax(dim=-1)
                drawn = picked.tolist()  # one read a depth for the whole batch
            else:
                probs = target_probs(logits, settings)
                drawn = [sample(probs[i], self.generators[r]) for i, r in enumerate(self.active)]
                picked = torch.tensor(drawn, device=dev)
            for i, token in enumerate(drawn):
                if d < rooms[i]:
                    chains[i].append(int(token))
                    if not settings.greedy:
                        q_rows[i].append(probs[i])
            feed = picked.view(-1, 1)
        state.drop_draft()
        for draft, chain, q in zip(drafts, chains, q_rows):  # cut after the first EOS, as a single request's draft
            for j, token in enumerate(chain):
                draft.tokens.append(token)
                if q:
                    draft.q_rows.append(q[j])  # the exact distribution the token was drawn from
                if token in self.eos:
                    break
        return drafts

    def step(self, cap: int, drafter: int = 0) -> tuple[int, float]:
        """One verification step with every row's chain capped at ``cap`` draft tokens (0: plain), drafted by the
        decoder's drafter number ``drafter``; the tokens it committed over all rows and its wall time, drafting
        included (a cap policy's reward: goodput)."""
        if self.done:
            raise RuntimeError("the batch has finished; start another")
        cap, drafter = int(cap), int(drafter)
        if cap < 0:
            raise SettingsError(f"a chain cap is a number of draft tokens >= 0, got {cap}")
        if self.drafter_sets and not 0 <= drafter < len(self.drafter_sets):
            raise SettingsError(f"drafter {drafter} out of range: this batch's rows hold {len(self.drafter_sets)}")
        t_step, rows, stepped = time.perf_counter(), len(self.active), list(self.active)
        laggard = min(len(self.rows[r].token_ids) for r in stepped)
        with torch.inference_mode():
            if len(self.drafter_sets) > 1:  # several drafters: a plain step (cap 0) runs none of them
                self.drafters = self._rows(drafter) if cap else None
            self.begin_s = time.perf_counter() - t_step
            committed = self._step(cap)
        seconds = time.perf_counter() - t_step
        self.progress = min(len(self.rows[r].token_ids) for r in stepped) - laggard
        reward = self.decoder.reward
        if cap and reward == "slowest":  # the rows' rates under the drafter, what slowest_share reads
            rates = self.row_rates.setdefault(drafter, {})
            for r in stepped:
                mine = rates.setdefault(r, [0, 0])
                mine[0] += self.rows[r].accepted_lengths[-1]
                mine[1] += 1
        self.worth = (self.progress if reward == "progress" else committed / rows * (
            self.slowest_share(drafter, self.SLOWEST_PRIOR_STEPS) if reward == "slowest" and cap else 1.0))
        self.caps.append(cap)
        self.drafter_choices.append(drafter)
        self.steps.append((rows, committed, seconds, self.progress, self.worth, self.begin_s + self.draft_s, self.width))
        return committed, seconds

    def _step(self, cap: int) -> int:
        model, stack, state, settings = self.model, self.stack, self.state, self.settings
        rows, tokens, active, drafters = self.rows, self.tokens, self.active, self.drafters
        t_draft = time.perf_counter()
        drafts = self._draft(cap)
        self.draft_s, self.accepted = time.perf_counter() - t_draft, 0
        q = self.width = 1 + max(len(d.tokens) for d in drafts)
        rows_in = []  # per row: its tokens, their positions, which are real (a row's chain padded to q)
        for r, draft in zip(active, drafts):
            n, base = 1 + len(draft.tokens), len(tokens[r]) - 1
            rows_in.append(([tokens[r][-1], *draft.tokens] + [0] * (q - n), list(range(base, base + q)),
                            [1] * n + [0] * (q - n)))
        ids, pos, real = torch.tensor(list(zip(*rows_in)), dtype=torch.long).to(model.device)  # one copy to the device
        start = state.slots
        hidden = state.forward(ids, pos, real.bool())
        logits = stack.model.lm_head(stack.model.norm(hidden)).float()  # [B, q, V]
        kept, still, committed = [], [], 0
        greedy = greedy_accept_rows([d.tokens for d in drafts], logits) if settings.greedy else None  # one read
        for i, (r, draft) in enumerate(zip(active, drafts)):
            k = len(draft.tokens)
            row_logits = logits[i, : k + 1]
            if greedy is not None:
                accepted, nxt = greedy[i]
            else:
                q_rows = torch.stack(draft.q_rows) if draft.q_rows else row_logits[:0]
                accepted, nxt = speculative_accept(draft.tokens, q_rows, target_probs(row_logits, settings),
                                                   self.generators[r])
            self.accepted += accepted
            before = len(rows[r].token_ids)
            pending = tokens[r][-1]
            self._commit(rows[r], tokens[r], [*draft.tokens[:accepted], nxt])
            got = len(rows[r].token_ids) - before
            committed += got
            rows[r].steps += 1
            rows[r].accepted_lengths.append(got)
            kept.append(1 + accepted)
            d = drafters[r] if drafters is not None else None
            if d is not None:
                if d.needs_logits:
                    d.observe([pending, *draft.tokens[:accepted]], row_logits[: accepted + 1])
                if k:
                    d.feedback(k, accepted)
            if rows[r].stop_reason:
                rows[r].latency_s = time.perf_counter() - self.t0
                for held in self.drafter_sets:  # every drafter the row began learns the whole request
                    if held is not None:
                        held[r].finish(tokens[r])
            else:
                still.append(i)
        state.keep(start, kept)
        if len(still) < len(active):
            if still:
                state.select(still)
            self.active = [active[i] for i in still]
        decoder = self.decoder
        if state.holes > max(decoder.compact_min, decoder.compact_share * state.slots):  # holes cost; packing copies
            state.compact()
        return committed

    def _commit(self, row, tokens: list[int], new: list[int]) -> None:
        """Append ``new`` up to EOS and within the budget (:func:`commit_cut`: a single request's rule, per row)."""
        kept, reason = commit_cut(new, self.eos, self.max_new_tokens - len(row.token_ids))
        row.token_ids.extend(kept)
        tokens.extend(kept)
        row.stop_reason = row.stop_reason or reason

    def outcome(self) -> BatchOutcome:
        total = time.perf_counter() - self.t0
        columns = [list(c) for c in zip(*self.steps)] if self.steps else [[] for _ in range(7)]
        return BatchOutcome(self.rows, len(self.caps), self.prefill_s, total - self.prefill_s, list(self.caps),
                            list(self.drafter_choices), *columns)
