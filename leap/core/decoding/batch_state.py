"""The state of a batch between steps (issue 37): each row's output (:class:`BatchRow`), what a batched call returns
(:class:`BatchOutcome`) and the cache with its per-row slot bookkeeping (:class:`BatchState`; the layout and why it is
lossless are in :mod:`leap.core.decoding.batch`).

Who calls what: :class:`~leap.core.decoding.batch_session.BatchSession` makes and steps a :class:`BatchState`;
:class:`~leap.core.decoding.batch.BatchDecoder` returns a :class:`BatchOutcome`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from leap.core.modeling.direct.llama import layer_call
from leap.core.modeling.kv_cache import LeapKVCache, eager_attention
from leap.core.modeling.layers import LayerPlan, LayerStack

__all__ = ["BatchRow", "BatchOutcome", "BatchState"]


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
    drafters: list[int] = field(default_factory=list)  # the drafter (index in the decoder's list) of every step
    #: per step: the rows it decoded, the tokens it committed over them and its wall time (a drafter's rows begun and
    #: its catching up included): what :class:`~leap.search.batch.BatchSearch` weighs drafting by, every cost in
    step_rows: list[int] = field(default_factory=list)
    step_committed: list[int] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    step_progress: list[int] = field(default_factory=list)  #: how far each step moved the batch's laggard
    #: what each step was worth to the decoder's bandit, budget and tally (its ``reward``: ``BatchSession.worth``)
    step_worth: list[float] = field(default_factory=list)
    #: per step: its drafting seconds (a drafter's rows begun included) and its verification's width (tokens a row
    #: verified: 1 + the longest chain; 1 for a plain step) - with ``step_s``, what its verification alone took
    step_draft_s: list[float] = field(default_factory=list)
    step_width: list[int] = field(default_factory=list)

    @property
    def new_tokens(self) -> int:
        return sum(len(r.token_ids) for r in self.rows)


class BatchState:
    """The batch's cache and per-row slot bookkeeping (see the module docstring)."""

    def __init__(self, stack: LayerStack, batch: int, capacity: int) -> None:
        self.stack = stack
        self.cache = LeapKVCache(stack.num_layers, capacity)  # rows' slots move (gather_slots): leap's eager cache
        self.valid = torch.zeros(batch, 0, dtype=torch.bool, device=stack.device)
        self.slot_pos = torch.zeros(batch, 0, dtype=torch.long, device=stack.device)

    @property
    def slots(self) -> int:
        return int(self.valid.shape[1])

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, new_valid: torch.Tensor) -> torch.Tensor:
        """Append ``q`` slots (``ids``, ``positions``: ``[B, q]``; ``new_valid`` says which are real) and run
        every layer over them; queries attend to their row's valid keys before them. Returns the final
        hidden states ``[B, q, H]``."""
        self.valid = torch.cat([self.valid, new_valid], dim=1)
        self.slot_pos = torch.cat([self.slot_pos, positions], dim=1)
        return self._run(self.stack.full_plan, ids, positions, self.valid, self.slot_pos)

    def draft_forward(self, plan: LayerPlan, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """A layer draft's forward (LEAP's skip/repeat configuration as ``plan``): one token a row (``ids``,
        ``[B, 1]``) through ``plan``'s layers only, attending to the row's valid slots and to the draft tokens fed
        before it since the last :meth:`drop_draft` (``positions``: ``[B, d + 1]``, theirs and this one's). The planned
        layers append to their caches (a repeated layer's second pass replaces its first's entries, as a single
        request's draft does); the slot bookkeeping is left alone. Returns the hidden states ``[B, 1, H]``."""
        b, drafted = ids.shape[0], positions.shape[1]
        valid = torch.cat([self.valid, torch.ones(b, drafted, dtype=torch.bool, device=self.valid.device)], dim=1)
        slot_pos = torch.cat([self.slot_pos, positions], dim=1)
        return self._run(plan, ids, positions[:, -1:], valid, slot_pos)

    def drop_draft(self) -> None:
        """Take back what :meth:`draft_forward` appended: every layer's cache cropped to the batch's slots."""
        self.stack.rollback(self.cache, self.slots)

    def _run(self, plan: LayerPlan, ids: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor,
             slot_pos: torch.Tensor) -> torch.Tensor:
        """``plan``'s layers over ``ids`` (``[B, q]``, the last ``q`` of the ``valid`` slots), each query seeing its
        row's valid slots up to itself."""
        stack, model = self.stack, self.stack.model
        q = ids.shape[1]
        before = valid.shape[1] - q
        earlier = torch.ones(q, before, dtype=torch.bool, device=stack.device)
        causal = torch.ones(q, q, dtype=torch.bool, device=stack.device).tril()
        allowed = valid[:, None, :] & torch.cat([earlier, causal], dim=1)[None]  # [B, q, S + q]
        window_mask = None
        if stack.window:
            near = (positions[:, :, None] - slot_pos[:, None, :]) < stack.window
            window_mask = self._additive(allowed & near)
        mask = self._additive(allowed)
        hidden = model.embed_tokens(ids)
        position_embeddings = model.rotary_emb(hidden, position_ids=positions)
        with eager_attention(stack.device):  # the key length changes every step: no cuDNN plan per shape on CUDA
            for index, passes in plan:
                for p in range(passes):
                    if p:  # REPEAT: the second pass replaces the first pass's cache entries
                        self.cache.layers[index].crop(-q)
                    hidden = layer_call(model.layers[index], hidden, cache=self.cache, attention_mask=mask,
                                        position_ids=positions, position_embeddings=position_embeddings,
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
            cache = LeapKVCache(stack.num_layers, len(p))  # never the graph engine's own cache (a session's)
            if len(p) > 1:
                stack.run_layers(stack.embed(p[:-1]), stack.full_plan, cache, 0)
            caches.append(cache)
        self._lay_out(caches, width)
        lengths = torch.tensor([len(p) - 1 for p in prompts], device=stack.device)
        slot = torch.arange(width, device=stack.device)[None, :]
        self.valid = slot >= (width - lengths)[:, None]
        self.slot_pos = (slot - (width - lengths)[:, None]).clamp_min(0)
        return caches

    def _lay_out(self, caches: Sequence[LeapKVCache], width: int) -> None:
        """Append the rows' prompt entries to every layer, right-aligned in ``width`` slots (zeros before them)."""
        for i, layer in enumerate(self.cache.layers):
            like = next(c.layers[i].keys for c in caches if c.layers[i].is_initialized)
            keys = like.new_zeros(len(caches), like.shape[1], width, like.shape[3])
            values = torch.zeros_like(keys)
            for r, c in enumerate(caches):
                n = c.layers[i].length
                if n:
                    keys[r, :, width - n:] = c.layers[i].keys[0]
                    values[r, :, width - n:] = c.layers[i].values[0]
            layer.append(keys, values)

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
