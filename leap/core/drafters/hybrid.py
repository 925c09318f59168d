"""The layer-skip draft as a drafter, and the hybrid of a model-free drafter with it.

* ``layer-skip``: proposes nothing model-free and always lets the step's
  :class:`~leap.core.config.LayerConfig` draft (today's self-speculative drafting, unchanged);
* ``hybrid``: a model-free drafter first (``free``, default ``suffix``); when it proposes fewer than
  ``min_free`` tokens (default 1: it had no candidate), the layer-skip draft *continues the chain*
  from the model-free tokens (they are fed through the draft's layers in one pass, then it drafts
  on under its draft-length policy). Without a ``LayerConfig`` in the step, ``hybrid`` is its
  model-free part alone;
* ``cascade``: a model-free drafter first (``first``, default ``suffix``); when it proposes fewer than
  ``min_first`` tokens (default 8: only a copy longer than the low-bit chain beats it), another drafter (``then``, default ``lowbit``, the low-bit self-draft) drafts the
  step instead - copy when the context repeats, a model draft otherwise, with no layer configuration.
  Arguments for the parts are prefixed: ``cascade:then=lowbit,then_num_tokens=8,first_min_prob=0.2``.

Who calls what: :class:`leap.core.decoding.decoder.DecodingSession` asks :meth:`continue_with_layers` after
:meth:`propose`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leap.core.drafters.base import Drafter, drafters, make_drafter
from leap.core.trees.draft_tree import DraftTree
from leap.core.errors import SettingsError

__all__ = ["LayerSkip", "Hybrid", "Cascade"]


@drafters.register("layer-skip")
class LayerSkip(Drafter):
    """Self-drafting with the model's own layers under the step's LayerConfig (the default)."""

    name = "layer-skip"
    uses_layers = True

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        return []

    def continue_with_layers(self, proposed: int) -> bool:
        return True


@drafters.register("hybrid")
class Hybrid(Drafter):
    """A model-free drafter first; the layer-skip draft continues when it has no confident candidate."""

    name = "hybrid"
    uses_layers = True

    def __init__(self, free: str | Drafter = "suffix", min_free: int = 1, **free_kwargs: Any) -> None:
        if min_free < 0:
            raise SettingsError(f"hybrid: min_free must be >= 0, got {min_free}")
        if free in ("hybrid", "layer-skip"):
            raise SettingsError("hybrid: the first part must be a model-free drafter (e.g. suffix, prompt-lookup)")
        self.free = make_drafter(free, **free_kwargs)
        self.min_free = int(min_free)
        self.needs_logits = self.free.needs_logits
        self.host_reads_per_step, self.host_reads_per_node = self.free.host_reads_per_step, self.free.host_reads_per_node


    @classmethod
    def fingerprint(cls, model: Any, free: str | Drafter = "suffix", **kwargs: Any) -> str:
        """Its own arguments' and its model-free part's."""
        own = super().fingerprint(model, free=free, **kwargs)
        if not isinstance(free, str):
            return own
        part = {k: v for k, v in kwargs.items() if k != "min_free"}
        return f"{own}-{drafters.get(free).fingerprint(model, **part)}"
    def begin(self, prompt: Sequence[int]) -> None:
        self.free.begin(prompt)

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        return self.free.propose(tokens, max_tokens)

    def continue_with_layers(self, proposed: int) -> bool:
        return proposed < self.min_free

    def observe(self, inputs, logits) -> None:
        self.free.observe(inputs, logits)

    def feedback(self, drafted: int, accepted: int) -> None:
        self.free.feedback(drafted, accepted)

    def finish(self, tokens: Sequence[int]) -> None:
        self.free.finish(tokens)


@drafters.register("cascade")
class Cascade(Drafter):
    """A model-free drafter first; another drafter (default: the low-bit self-draft) when it has no draft."""

    name = "cascade"

    def __init__(self, first: str | Drafter = "suffix", then: str | Drafter = "lowbit", min_first: int = 8,
                 first_when_sampling: bool = True, **kwargs: Any) -> None:
        if min_first < 1:
            raise SettingsError(f"cascade: min_first must be >= 1, got {min_first}")
        unknown = sorted(k for k in kwargs if not k.startswith(("first_", "then_")))
        if unknown:
            raise SettingsError(f"cascade: unknown arguments {unknown}; prefix a part's arguments with first_ or then_")
        if isinstance(first, str) and drafters.get(first).uses_layers:
            raise SettingsError("cascade: the first part must be a model-free drafter (e.g. suffix, prompt-lookup)")
        self.first = make_drafter(first, **{k[6:]: v for k, v in kwargs.items() if k.startswith("first_")})
        self.then = make_drafter(then, **{k[5:]: v for k, v in kwargs.items() if k.startswith("then_")})
        if self.then.uses_layers:
            raise SettingsError("cascade: the second part drafts without a layer configuration; use hybrid for "
                                "a layer-skip continuation")
        self.min_first, self.first_when_sampling = int(min_first), bool(first_when_sampling)
        self.keeps_context = self.first.keeps_context or self.then.keeps_context  # lowbit's context, by default
        self.parts = (self.first, self.then)
        self.needs_logits = any(d.needs_logits for d in self.parts)
        self.needs_costs = any(d.needs_costs for d in self.parts)
        self.needs_model = any(d.needs_model for d in self.parts)
        self.takes_prompt_kv = any(d.takes_prompt_kv for d in self.parts)  # lowbit's KV handoff, passed on
        self.samples_drafts = self.then.samples_drafts
        self.tree_nodes = max(d.tree_nodes for d in self.parts)
        self.host_reads_per_step = sum(d.host_reads_per_step for d in self.parts)
        self.host_reads_per_node = max(d.host_reads_per_node for d in self.parts)
        self.used: list[int] = [0, 0]  # steps drafted by each part
        self._chosen: Drafter | None = None

    @classmethod
    def unavailable(cls, model: Any, first: str | Drafter = "suffix", then: str | Drafter = "lowbit",
                    **kwargs: Any) -> str | None:
        """What a part made from a registered name says (``then_gguf=PATH`` reaches ``lowbit``'s check)."""
        for prefix, part in (("first_", first), ("then_", then)):
            if isinstance(part, str):
                args = {k[len(prefix):]: v for k, v in kwargs.items() if k.startswith(prefix)}
                why = drafters.get(part).unavailable(model, **args)
                if why:
                    return f"its {prefix[:-1]} part ({part}): {why}"
        return None

    @classmethod
    def fingerprint(cls, model: Any, first: str | Drafter = "suffix", then: str | Drafter = "lowbit",
                    **kwargs: Any) -> str:
        """Its own arguments' and its parts' (a default of ``lowbit`` changes what ``cascade`` is)."""
        own = super().fingerprint(model, first=first, then=then, **kwargs)
        parts = [drafters.get(part).fingerprint(model, **{k[len(prefix):]: v for k, v in kwargs.items()
                                                           if k.startswith(prefix)})
                 for prefix, part in (("first_", first), ("then_", then)) if isinstance(part, str)]
        return "-".join([own, *parts])

    def shared_state_key(self) -> Any:
        """Its second part's: in a search, ``cascade`` and the ``lowbit`` options share one llama.cpp context. Apart,
        whichever of them drafted second after the other paid for catching its own context up on everything the other
        had decoded, in its trial (a ``cascade`` step after two ``lowbit`` steps measured 0.87-1.23 times plain
        decoding's speed, against 1.72-2.46 shared: ``experiments/2026-11-28-shared-cascade``), and the search judged it
        by that."""
        return self.then.shared_state_key()

    def state_owner(self) -> Drafter:
        return self.then.state_owner()

    def share_state(self, other: Drafter) -> None:
        self.then.share_state(other)

    @property
    def last_match(self) -> int | None:
        return self.first.last_match

    def _pick(self, tree: DraftTree) -> bool:
        """Whether the first part's ``tree`` drafts the step (else the second part does)."""
        use_first = tree.depth >= self.min_first
        self._chosen = self.first if use_first else self.then
        self.used[0 if use_first else 1] += 1
        return use_first

    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        tree = self.first.propose_tree(tokens, max_depth)
        return tree if self._pick(tree) else self.then.propose_tree(tokens, max_depth)

    # ------------------------------------------------------------------ the rows of a batch (issue 37)
    @classmethod
    def join_rows(cls, rows: Sequence[Drafter], model: Any) -> None:
        """Each part's rows joined as that part's class joins them (``lowbit``'s: one llama.cpp context, a sequence
        per row), so that the rows the first part leaves to the second draft together (:meth:`propose_rows`)."""
        for part in (0, 1):
            group = [r.parts[part] for r in rows]
            type(group[0]).join_rows(group, model)

    @classmethod
    def begin_rows(cls, rows: Sequence[Drafter], prompts: Sequence[Sequence[int]]) -> None:
        for part in (0, 1):
            group = [r.parts[part] for r in rows]
            type(group[0]).begin_rows(group, prompts)

    @classmethod
    def propose_rows(cls, rows: Sequence[Drafter], tokens: Sequence[Sequence[int]],
                     max_tokens: Sequence[int]) -> list[list[int]]:
        """Row ``i``'s chain is what its :meth:`propose` gives: the first part's where it is long enough, else the
        second part's - drafted for all such rows in one :meth:`propose_rows` of the second part's class (before,
        each row's ``lowbit`` ran llama.cpp alone, and the batch's first step with ``cascade`` cost seconds)."""
        return cls._by_part(rows, tokens, max_tokens, True, DraftTree.first_chain, lambda group, idx: type(
            group[0]).propose_rows(group, [tokens[i] for i in idx], [max_tokens[i] for i in idx]))

    @classmethod
    def propose_sampled_rows(cls, rows: Sequence[Drafter], tokens: Sequence[Sequence[int]],
                             max_tokens: Sequence[int], generators: Sequence[Any]) -> list[list[tuple[int, Any]]]:
        """Under sampling, row ``i``'s draws are what its :meth:`propose_sampled` gives: the first part's chain where
        it is long enough, else the second part's draws - for all such rows in one
        :meth:`~leap.core.drafters.base.Drafter.propose_sampled_rows` of the second part's class."""
        if not all(isinstance(r, Cascade) and r.then.samples_drafts for r in rows):
            return super().propose_sampled_rows(rows, tokens, max_tokens, generators)
        return cls._by_part(rows, tokens, max_tokens, False, _drawn_chain, lambda group, idx: type(
            group[0]).propose_sampled_rows(group, [tokens[i] for i in idx], [max_tokens[i] for i in idx],
                                           [generators[i] for i in idx]))

    @staticmethod
    def _by_part(rows, tokens, max_tokens, greedy: bool, chain_of, then_rows) -> list:
        """The rows' chains as each row's own proposal: the first part's tree (under sampling only with
        ``first_when_sampling``) where :meth:`_pick` takes it (``chain_of(tree)``), the other rows drafted together by
        ``then_rows(their second parts, their row indices)``."""
        out: list[list[Any]] = [[] for _ in rows]
        then = []
        for i, (row, t, m) in enumerate(zip(rows, tokens, max_tokens)):
            if m <= 0:
                continue
            tree = row.first.propose_tree(t, m) if greedy or row.first_when_sampling else DraftTree()
            if row._pick(tree):
                out[i] = chain_of(tree)
            else:
                then.append(i)
        if then:
            chains = then_rows([rows[i].then for i in then], then)
            for i, chain in zip(then, chains):
                out[i] = list(chain)
        return out

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        return self.propose_tree(tokens, max_tokens).first_chain()

    def propose_sampled_tree(self, tokens: Sequence[int], max_depth: int, generator) -> DraftTree:
        tree = self.first.propose_tree(tokens, max_depth) if self.first_when_sampling else DraftTree()
        if self._pick(tree):
            return tree  # deterministic proposals: draws None (one-hot q) for the sampling rules
        if self.then.samples_drafts:
            return self.then.propose_sampled_tree(tokens, max_depth, generator)
        return self.then.propose_tree(tokens, max_depth)

    def propose_sampled(self, tokens: Sequence[int], max_tokens: int, generator):
        return _drawn_chain(self.propose_sampled_tree(tokens, max_tokens, generator))

    def feedback(self, drafted: int, accepted: int) -> None:
        if self._chosen is not None:
            self._chosen.feedback(drafted, accepted)
        self._chosen = None

    # ------------------------------------------------------------------ pass-through
    def use_costs(self, costs) -> None:
        for d in self.parts:
            if d.needs_costs:
                d.use_costs(costs)

    def use_model(self, model: Any) -> None:
        for d in self.parts:
            if d.needs_model:
                d.use_model(model)

    def use_sampling(self, settings: Any) -> None:
        for d in self.parts:
            d.use_sampling(settings)

    def use_prompt_kv(self, kv: Any) -> None:
        for d in self.parts:
            if d.takes_prompt_kv:
                d.use_prompt_kv(kv)

    def begin(self, prompt: Sequence[int]) -> None:
        for d in self.parts:
            d.begin(prompt)

    def observe(self, inputs, logits) -> None:
        for d in self.parts:
            if d.needs_logits:
                d.observe(inputs, logits)

    def finish(self, tokens: Sequence[int]) -> None:
        for d in self.parts:
            d.finish(tokens)

    def steady_start(self) -> None:
        for d in self.parts:
            d.steady_start()


def _drawn_chain(tree: DraftTree) -> list[tuple[int, Any]]:
    """A tree's first chain as ``(token, q)`` pairs, a deterministic proposal's ``q`` one-hot."""
    out, row = [], 0
    while tree.children(row):  # the first chain; row r holds node r - 1
        row = next(iter(tree.children(row).values()))
        token, q = tree.tokens[row - 1], tree.draws[row - 1]
        out.append((token, q if q is not None else {token: 1.0}))
    return out
