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
branch (``tree_nodes > 1``) are refused with the reason: their batched forms are not built.

The chain cap per step is ``num_tokens`` (fixed), or chosen by :class:`~leap.core.policies.batch_caps.GoodputBandit` (``num_tokens="auto"``) from the goodput measured on the batch itself, with 0 (no drafting:
plain batched decoding) among its arms - speculation turns itself off where it loses. One bandit per number
of rows still in the batch, kept across calls, so later batches start from what earlier ones measured.

Who calls what: ``leap bench --batch-size B`` (:mod:`leap.bench.harness`, through
:meth:`leap.bench.methods.BenchMethod.run_batch`) and library code call :meth:`BatchDecoder.generate`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from leap.core.decoding.step_draft import StepDraft, commit_cut
from leap.core.drafters import Drafter, make_drafter
from leap.core.errors import ContextLengthError, SettingsError
from leap.core.modeling.hf_interface import call_layer
from leap.core.modeling.kv_cache import PromptKV
from leap.core.modeling.layers import LayerStack
from leap.core.modeling.model import LeapModel
from leap.core.verify.sampling import SamplingSettings, greedy_accept, speculative_accept, target_probs

__all__ = ["BatchDecoder", "BatchOutcome", "BatchRow", "batch_refusal"]


def batch_refusal(drafter: type[Drafter] | Drafter) -> str | None:
    """Why ``drafter`` cannot draft in a batch (None: it can), from what it declares on the base class."""
    if drafter.uses_layers or drafter.exit_layer is not None:
        return "it drafts with the model's own layers (layer drafts are not batched yet)"
    if drafter.needs_features:
        return "it reads the verifier's top-layer features (not passed per row yet)"
    if drafter.tree_nodes > 1:
        return "it drafts trees (batched verification takes chains)"
    return None


@dataclass
class BatchRow:
    """One request of a batch: its output and what its decoding cost."""

    token_ids: list[int] = field(default_factory=list)
    stop_reason: str = ""
    steps: int = 0  # verification forwards this row took part in
    accepted_lengths: list[int] = field(default_factory=list)  # tokens committed per step (accepted + 1)
    latency_s: float = 0.0  # from the start of the batch's call to this row's last token


@dataclass
class BatchOutcome:
    """What :meth:`BatchDecoder.generate` returns: the rows in the order given, and the batch's steps."""

    rows: list[BatchRow]
    steps: int  # batched forwards after the prefill
    prefill_time_s: float
    decode_time_s: float
    caps: list[int] = field(default_factory=list)  # the chain cap of every step

    @property
    def new_tokens(self) -> int:
        return sum(len(r.token_ids) for r in self.rows)


class BatchState:
    """The batch's cache and per-row slot bookkeeping (see the module docstring)."""

    def __init__(self, stack: LayerStack, batch: int, capacity: int) -> None:
        self.stack = stack
        self.cache = stack.new_cache(capacity)
        self.valid = torch.zeros(batch, 0, dtype=torch.bool, device=stack.device)
        self.slot_pos = torch.zeros(batch, 0, dtype=torch.long, device=stack.device)

    @property
    def slots(self) -> int:
        return int(self.valid.shape[1])

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, new_valid: torch.Tensor) -> torch.Tensor:
        """Append ``q`` slots (``ids``, ``positions``: ``[B, q]``; ``new_valid`` says which are real) and run
        every layer over them; queries attend to their row's valid keys before them. Returns the final
        hidden states ``[B, q, H]``."""
        stack, model = self.stack, self.stack.model
        b, q = ids.shape
        start = self.slots
        self.valid = torch.cat([self.valid, new_valid], dim=1)
        self.slot_pos = torch.cat([self.slot_pos, positions], dim=1)
        earlier = torch.ones(q, start, dtype=torch.bool, device=stack.device)
        causal = torch.ones(q, q, dtype=torch.bool, device=stack.device).tril()
        allowed = self.valid[:, None, :] & torch.cat([earlier, causal], dim=1)[None]  # [B, q, S + q]
        window_mask = None
        if stack.window:
            near = (positions[:, :, None] - self.slot_pos[:, None, :]) < stack.window
            window_mask = self._additive(allowed & near)
        mask = self._additive(allowed)
        hidden = model.embed_tokens(ids)
        position_embeddings = model.rotary_emb(hidden, position_ids=positions)
        for layer in model.layers:
            hidden = call_layer(layer, hidden, cache=self.cache, attention_mask=mask, position_ids=positions,
                                position_embeddings=position_embeddings, leap_layerwise=True,
                                leap_window_mask=window_mask)
        return hidden

    def prefill(self, prompts: Sequence[Sequence[int]]) -> list:
        """Take in every prompt but its last token (pending), each row alone - exactly the single-request prefill,
        with no padded positions computed - then lay the rows' entries out right-aligned in the batch's slots
        (the shorter rows' leading slots are holes). Returns each row's own cache (what a drafter that takes the
        target's prompt cache is handed)."""
        stack = self.stack
        width = max(len(p) for p in prompts) - 1
        if width <= 0:
            return []
        caches = []
        for p in prompts:
            cache = stack.new_cache(len(p))
            if len(p) > 1:
                stack.run_layers(stack.embed(p[:-1]), stack.full_plan, cache, 0)
            caches.append(cache)
        for i, layer in enumerate(self.cache.layers):
            like = next(c.layers[i].keys for c in caches if c.layers[i].is_initialized)
            keys = like.new_zeros(len(prompts), like.shape[1], width, like.shape[3])
            values = torch.zeros_like(keys)
            for r, c in enumerate(caches):
                n = c.layers[i].length
                if n:
                    keys[r, :, width - n:] = c.layers[i].keys[0]
                    values[r, :, width - n:] = c.layers[i].values[0]
            layer.append(keys, values)
        lengths = torch.tensor([len(p) - 1 for p in prompts], device=stack.device)
        slot = torch.arange(width, device=stack.device)[None, :]
        self.valid = slot >= (width - lengths)[:, None]
        self.slot_pos = (slot - (width - lengths)[:, None]).clamp_min(0)
        return caches

    def _additive(self, allowed: torch.Tensor) -> torch.Tensor:
        dtype = self.stack.dtype
        mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
        return mask.masked_fill_(~allowed, torch.finfo(dtype).min).unsqueeze(1)

    def keep(self, start: int, kept: Sequence[int]) -> None:
        """After a step that appended slots from ``start``: row ``r`` keeps its first ``kept[r]`` new slots;
        the slots after the longest keep are cropped from every layer."""
        end = start + max(kept)
        keep = torch.as_tensor(list(kept), device=self.valid.device)
        offsets = torch.arange(self.slots - start, device=self.valid.device)
        self.valid[:, start:] &= offsets[None, :] < keep[:, None]
        self.valid, self.slot_pos = self.valid[:, :end], self.slot_pos[:, :end]
        self.stack.rollback(self.cache, end)

    def compact(self) -> None:
        """Pack each row's valid slots to the front, in order (holes left by unequal acceptance go)."""
        counts = self.valid.sum(dim=1)
        n = counts.max().item()  # one read, when packing
        index = torch.argsort((~self.valid).to(torch.int8), dim=1, stable=True)[:, :n]
        self.cache.gather_slots(index)
        self.slot_pos = self.slot_pos.gather(1, index)
        self.valid = torch.arange(n, device=self.valid.device)[None, :] < counts[:, None]

    @property
    def holes(self) -> int:
        """Slots no row needs: the slot count beyond the fullest row's."""
        return self.slots - self.valid.sum(dim=1).max().item() if self.slots else 0  # one read a step

    def select(self, rows: Sequence[int]) -> None:
        """Keep only the batch rows ``rows`` (finished requests leave)."""
        index = torch.as_tensor(list(rows), device=self.valid.device)
        self.valid, self.slot_pos = self.valid[index], self.slot_pos[index]
        self.cache.select_rows(index)


class BatchDecoder:
    """Decode several prompts together, greedy or sampled, plain or with a drafter per row.

    Args:
        model: the target model.
        drafter: a registered drafter name or a :class:`~leap.core.drafters.base.Drafter` class (one instance is
            made per row with ``drafter_kwargs``), or None for plain batched decoding.
        num_tokens: the most draft tokens per row and step (the drafter's own setting still applies below it),
            or ``"auto"``: a :class:`~leap.core.policies.batch_caps.GoodputBandit` picks it per step among
            ``caps`` (0 included) by measured goodput.
        caps: the bandit's arms for ``num_tokens="auto"``.
        compact_min, compact_share: pack the rows' valid slots to the front once more than ``max(compact_min,
            compact_share * slots)`` slots are holes (attention over holes costs time; packing costs a copy of the
            cache); ``0, 0`` packs after every step that leaves a hole.
    """

    def __init__(self, model: LeapModel, drafter: str | type[Drafter] | None = None, *,
                 drafter_kwargs: dict | None = None, num_tokens: int | str = 16,
                 caps: Sequence[int] = (0, 2, 4, 8), compact_min: int = 64,
                 compact_share: float = 0.5) -> None:
        from leap.core.drafters import drafters

        self.model, self.stack = model, LayerStack(model)
        self.drafter, self.drafter_kwargs = drafter, dict(drafter_kwargs or {})
        self.compact_min, self.compact_share = int(compact_min), float(compact_share)
        self._pool: list[Drafter] = []
        self._policies: dict[int, Any] = {}  # rows in the batch -> its cap policy (FixedCap or GoodputBandit)
        if drafter is not None:
            why = batch_refusal(drafters.get(drafter) if isinstance(drafter, str) else drafter)
            if why:
                raise SettingsError(f"drafter {drafter!r} cannot draft in a batch: {why}; use a model-free drafter "
                                    f"(prompt-lookup, suffix, token-recycling) or lowbit")
        if num_tokens != "auto" and (not isinstance(num_tokens, int) or num_tokens < 0):
            raise SettingsError(f"num_tokens must be a number of draft tokens >= 0 or 'auto', got {num_tokens!r}")
        self.num_tokens = num_tokens
        self.caps = tuple(int(c) for c in caps)

    def _drafters(self, prompts: list[list[int]], settings: SamplingSettings, caches: Sequence = ()) -> list[Drafter] | None:
        """The rows' drafters for new requests: one instance per row, kept across calls (as a
        :class:`SelfSpecDecoder` keeps its drafter across requests: ``begin`` starts each request afresh) and
        joined once (:meth:`Drafter.join_rows`: lowbit's rows share one llama.cpp context), then told the prompts
        together (:meth:`Drafter.begin_rows`)."""
        if self.drafter is None:
            return None
        if len(self._pool) < len(prompts):
            self._pool = [make_drafter(self.drafter, **self.drafter_kwargs) if isinstance(self.drafter, str)
                          else self.drafter(**self.drafter_kwargs) for _ in prompts]
            type(self._pool[0]).join_rows(self._pool, self.model)
        rows = self._pool[: len(prompts)]
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

    def generate(self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int = 128, temperature: float = 0.0,
                 top_p: float = 1.0, seed: int = 0) -> BatchOutcome:
        """Decode every prompt to EOS or ``max_new_tokens``; row ``r`` samples with seed ``seed + r``."""
        from leap.core.policies.batch_caps import FixedCap, GoodputBandit

        prompts = [[int(t) for t in p] for p in prompts]
        model, stack = self.model, self.stack
        if not prompts or any(not p for p in prompts):
            raise SettingsError("every prompt of a batch needs at least one token")
        if int(max_new_tokens) < 1:
            raise SettingsError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        longest = max(len(p) for p in prompts)
        if longest + max_new_tokens > model.max_context:
            raise ContextLengthError(f"a prompt of {longest} tokens and {max_new_tokens} new tokens exceed "
                                     f"{model.name}'s {model.max_context}; shorten it or lower --max-new-tokens")
        settings = SamplingSettings(temperature, top_p)
        eos = model.eos_token_ids
        t0 = time.perf_counter()
        batch = len(prompts)
        rows = [BatchRow() for _ in prompts]
        tokens = [list(p) for p in prompts]
        generators = []
        for r in range(batch):
            g = torch.Generator(device=model.device)
            g.manual_seed(int(seed) + r)
            generators.append(g)
        state = BatchState(stack, batch, longest + max_new_tokens)
        with torch.inference_mode():
            caches = state.prefill(prompts)  # every prompt but its last token (pending)
            drafters = self._drafters(prompts, settings, caches)
            prefill = time.perf_counter() - t0
            active = list(range(batch))  # request index of each batch row
            caps: list[int] = []
            while active:
                t_step = time.perf_counter()
                # the cap policy of this many rows, kept across calls: goodput depends on the rows in the batch, and
                # what one batch measured is what the next one starts from (a run pays its exploration once)
                policy = self._policies.get(len(active))
                if policy is None:
                    policy = self._policies[len(active)] = GoodputBandit(self.caps) if self.num_tokens == "auto" \
                        else FixedCap(int(self.num_tokens))
                cap = policy.choose()
                drafts = [StepDraft(t_start=None) for _ in active]
                rooms = [min(cap, max_new_tokens - len(rows[r].token_ids) - 1) for r in active]
                if drafters is not None and settings.greedy:  # every row's chain, together where the drafter can
                    chains = type(drafters[0]).propose_rows([drafters[r] for r in active], [tokens[r] for r in active],
                                                            [max(room, 0) for room in rooms])
                    for draft, chain, room in zip(drafts, chains, rooms):
                        draft.take_free(chain[:max(room, 0)], None, eos)
                elif drafters is not None:
                    for draft, r, room in zip(drafts, active, rooms):
                        d = drafters[r]
                        if room <= 0:
                            continue
                        if d.samples_drafts:
                            drawn = d.propose_sampled(tokens[r], room, generators[r])[:room]
                            draft.take_free([t for t, _ in drawn], [q for _, q in drawn], eos,
                                            (model.vocab_size, model.device))
                        else:
                            draft.take_free(d.propose(tokens[r], room)[:room], None, eos,
                                            (model.vocab_size, model.device))
                q = 1 + max(len(d.tokens) for d in drafts)
                ids = torch.zeros(len(active), q, dtype=torch.long)
                pos = torch.zeros(len(active), q, dtype=torch.long)
                real = torch.zeros(len(active), q, dtype=torch.bool)
                for i, (r, draft) in enumerate(zip(active, drafts)):
                    n = 1 + len(draft.tokens)
                    base = len(tokens[r]) - 1
                    ids[i, :n] = torch.tensor([tokens[r][-1], *draft.tokens])
                    pos[i] = torch.arange(base, base + q)
                    real[i, :n] = True
                start = state.slots
                dev = model.device
                hidden = state.forward(ids.to(dev), pos.to(dev), real.to(dev))
                logits = stack.model.lm_head(stack.model.norm(hidden)).float()  # [B, q, V]
                kept, still, committed = [], [], 0
                for i, (r, draft) in enumerate(zip(active, drafts)):
                    k = len(draft.tokens)
                    row_logits = logits[i, : k + 1]
                    if settings.greedy:
                        accepted, nxt = greedy_accept(draft.tokens, row_logits)
                    else:
                        q_rows = torch.stack(draft.q_rows) if draft.q_rows else row_logits[:0]
                        accepted, nxt = speculative_accept(draft.tokens, q_rows, target_probs(row_logits, settings),
                                                           generators[r])
                    before = len(rows[r].token_ids)
                    pending = tokens[r][-1]
                    self._commit(rows[r], tokens[r], [*draft.tokens[:accepted], nxt], max_new_tokens, eos)
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
                        rows[r].latency_s = time.perf_counter() - t0
                        if d is not None:
                            d.finish(tokens[r])
                    else:
                        still.append(i)
                state.keep(start, kept)
                if len(still) < len(active):
                    if still:
                        state.select(still)
                    active = [active[i] for i in still]
                if state.holes > max(self.compact_min, self.compact_share * state.slots):  # attention over holes costs; packing costs a copy
                    state.compact()
                caps.append(cap)
                policy.update(cap, committed, time.perf_counter() - t_step)
        total = time.perf_counter() - t0
        return BatchOutcome(rows, len(caps), prefill, total - prefill, caps)

    @staticmethod
    def _commit(row: BatchRow, tokens: list[int], new: list[int], max_new_tokens: int, eos: frozenset) -> None:
        """Append ``new`` up to EOS and within the budget (:func:`commit_cut`: a single request's rule, per row)."""
        kept, reason = commit_cut(new, eos, max_new_tokens - len(row.token_ids))
        row.token_ids.extend(kept)
        tokens.extend(kept)
        row.stop_reason = row.stop_reason or reason
