"""``stand``: stochastic adaptive n-gram drafting (STAND's idea: n-gram tables of next-token
*distributions* taken from verification logits, drafted stochastically so that a draft carries a real
draft distribution ``q``).

Tables. For every verified position the verifier's distribution after it is known; STAND keeps, per
context of the last ``j`` tokens (``j = 1..order``), the ``top_k`` most likely next tokens with their
probabilities (renormalised over the ``top_k``; the latest observation of a context replaces the
earlier one, as Token Recycling does for bigrams). Memory is bounded: at most ``max_entries``
contexts, the least recently used evicted first (an ``OrderedDict``). Updates are deterministic for
a given history (``torch.topk`` on the same logits; ties broken by index).

Drafting follows the longest context found in the tables, token by token, up to ``num_tokens``:

* greedy decoding (:meth:`propose`): the most likely stored token - a one-hot draft, as every
  model-free drafter's;
* sampling (:meth:`propose_sampled`): a token drawn from the stored distribution by the Gumbel-max
  trick (Gumbel-Top-1, with the decoder's generator), returned *with* that distribution, which the
  decoder uses as ``q`` in the speculative sampling rule. Any ``q`` keeps the output distribution
  exactly the target's (Leviathan et al., 2023); a ``q`` close to ``p`` is accepted far more often
  than a one-hot draft, whose token is accepted with probability ``p(token)`` only.

Updates (``update=``): ``"mean"`` (STAND's rule, default) merges a repeat sighting of a context into
its stored distribution by a running mean, ``dist <- k/(k+1) dist + 1/(k+1) new`` (``k`` earlier
sightings), and re-cuts it to the ``top_k`` (ties by token id); ``"latest"`` keeps the latest only.

Trees (``shape=``, with ``tree_nodes`` the node cap):

* ``"chain"`` (default): the chains above;
* ``"best-first"``: the ``tree_nodes`` candidates with the highest path probabilities under the tables;
* ``"opt"``: the same, cut to the size that maximises the expected speed under the machine's
  calibrated verification cost (OPT-Tree, :mod:`leap.core.trees.opt_tree`; ``tree_nodes`` only caps it);
* ``"delayed"``: delayed tree expansion, a trunk of ``trunk`` tokens then ``branches`` branches of
  ``branch_len`` tokens (:func:`leap.core.trees.stochastic_tree.delayed_shape`).

Under greedy decoding the tree holds the most likely candidates (deterministic); under sampling its
shape is the greedy tree's (or the delayed skeleton), filled by Gumbel-Top-K draws without
replacement, each node keeping the ``q`` it was drawn from (:mod:`leap.core.trees.stochastic_tree`), so that
Traversal Verification can use them (``--tree-verify traversal``).

Who calls what: :class:`leap.core.decoding.decoder.DecodingSession` calls :meth:`observe` after every
verification (``needs_logits``), :meth:`propose_tree` under greedy decoding and
:meth:`propose_sampled_tree` under sampling (``samples_drafts = True``); ``leap bench --methods stand``,
``--drafter stand``, ``--method-arg stand:shape=opt``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import torch

from leap.core.runtime.costs import DENSE_K
from leap.core.trees.draft_tree import DraftTree
from leap.core.drafters.base import Drafter, drafters
from leap.core.errors import SettingsError
from leap.core.trees.opt_tree import check_shape, shaped_tree
from leap.core.trees.stochastic_tree import delayed_shape, fill_shape, gumbel_top_k, most_likely

__all__ = ["Stand"]

SHAPES = ("chain", "best-first", "opt", "delayed")


@drafters.register("stand")
class Stand(Drafter):
    """STAND-style n-gram tables of next-token distributions from the verifier; stochastic drafts and
    trees under sampling (see the module docstring)."""

    name = "stand"
    # observe: the verifier's top-k once per step, the overlap of each committed token's stored q (one per
    # committed token: drafted + 1); sampled trees: one Gumbel draw per expanded node
    host_reads_per_step = 3
    host_reads_per_node = 2
    needs_logits = True
    samples_drafts = True

    def __init__(self, order: int = 3, top_k: int = 8, num_tokens: int = 6, max_entries: int = 100_000,
                 update: str = "mean", shape: str = "chain", tree_nodes: int = 0, trunk: int = 2,
                 branches: int = 3, branch_len: int = 2) -> None:
        if order < 1 or top_k < 1 or num_tokens < 1 or max_entries < 1:
            raise SettingsError("stand needs order, top_k, num_tokens and max_entries >= 1")
        if update not in ("mean", "latest"):
            raise SettingsError(f"stand: update must be 'mean' or 'latest', got {update!r}")
        check_shape(shape, "stand", SHAPES)
        if tree_nodes < 0 or trunk < 0 or branches < 1 or branch_len < 1:
            raise SettingsError("stand needs tree_nodes >= 0, trunk >= 0, branches >= 1 and branch_len >= 1")
        self.order, self.top_k, self.num_tokens, self.max_entries = int(order), int(top_k), int(num_tokens), \
            int(max_entries)
        self.update, self.shape = update, shape
        self.tree_nodes = int(tree_nodes) or (DENSE_K if shape in ("best-first", "opt") else 0)
        self._nodes_from_costs = shape == "opt" and not int(tree_nodes)  # the calibration's max_tree_nodes
        if shape == "delayed":
            self.tree_nodes = trunk + branches * branch_len
        self.trunk, self.branches, self.branch_len = int(trunk), int(branches), int(branch_len)
        self.needs_costs = shape == "opt"
        self.costs = None
        # context (tuple of the last j tokens) -> (next token ids, their probabilities, sightings),
        # least recently used first
        self.table: OrderedDict[tuple[int, ...], tuple[tuple[int, ...], tuple[float, ...], int]] = OrderedDict()
        self.history: list[int] = []
        # per match order j: (running mean of the q/p overlap, sightings) - see _score_overlap
        self.overlap: list[tuple[float, int]] = [(0.5, 0)] * self.order
        self.last_match_of_lookup = 0
        self._pending_known = False

    def use_costs(self, costs) -> None:
        self.costs = costs
        if self._nodes_from_costs:
            self.tree_nodes = costs.max_tree_nodes

    # ------------------------------------------------------------------ learning from the verifier
    def begin(self, prompt: Sequence[int]) -> None:
        self.history = [int(t) for t in prompt]
        self._pending_known = True  # the prompt's last token, pending at the first step, is in history

    def observe(self, inputs: Sequence[int], logits: torch.Tensor) -> None:
        if not inputs:
            return
        if not self._pending_known:
            self.history.append(int(inputs[0]))  # the previous step's own token, now pending
        self._pending_known = False
        probs = torch.softmax(logits.float(), dim=-1)
        top = torch.topk(probs, min(self.top_k, probs.shape[-1]), dim=-1)
        ids, values = top.indices.tolist(), top.values.tolist()
        for i in range(len(inputs)):
            if i:
                self.history.append(int(inputs[i]))
            self._score_overlap(probs[i])
            total = sum(values[i])
            new = dict(zip(ids[i], (v / total for v in values[i])))
            for j in range(1, min(self.order, len(self.history)) + 1):
                self._store(tuple(self.history[-j:]), new)

    def _score_overlap(self, p: torch.Tensor) -> None:
        """Running mean, per match order, of ``sum_x min(p(x), q(x))`` between the stored ``q`` for the
        current context and the verifier's ``p`` that just arrived: the probability that a token drawn
        from ``q`` is accepted by speculative sampling (Leviathan et al., 2023, Theorem 3.5)."""
        match = self.last_match
        entry = self.lookup(self.history)
        self.last_match, order = match, self.last_match_of_lookup
        if entry is None:
            return
        ids, q = entry
        beta = torch.minimum(p[list(ids)], torch.tensor(q, dtype=p.dtype, device=p.device)).sum().item()
        mean, seen = self.overlap[order - 1]
        self.overlap[order - 1] = ((mean * seen + beta) / (seen + 1), seen + 1)

    def _store(self, key: tuple[int, ...], new: dict[int, float]) -> None:
        old = self.table.get(key)
        if old is None or self.update == "latest":
            merged, seen = new, 1
        else:
            k = old[2]
            merged = {t: p * k / (k + 1) for t, p in zip(old[0], old[1])}
            for t, p in new.items():
                merged[t] = merged.get(t, 0.0) + p / (k + 1)
            seen = k + 1
        best = sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))[: self.top_k]
        total = sum(p for _, p in best)
        self.table[key] = (tuple(t for t, _ in best), tuple(p / total for _, p in best), seen)
        self.table.move_to_end(key)
        while len(self.table) > self.max_entries:
            self.table.popitem(last=False)

    def lookup(self, context: Sequence[int]):
        """``(ids, probs)`` stored after the longest known suffix of ``context``, or None."""
        for j in range(min(self.order, len(context)), 0, -1):
            entry = self.table.get(tuple(int(t) for t in context[-j:]))
            if entry is not None:
                self.last_match = self.last_match_of_lookup = j
                return entry[0], entry[1]
        self.last_match = self.last_match_of_lookup = 0
        return None

    # ------------------------------------------------------------------ drafting
    def _walk(self, tokens: Sequence[int], max_tokens: int, choose) -> list:
        """Follow the tables from ``tokens``: ``choose(ids, probs)`` -> ``(token, item)`` per step."""
        context, out = list(tokens), []
        for _ in range(min(max_tokens, self.num_tokens)):
            entry = self.lookup(context)
            if entry is None:
                break
            token, item = choose(*entry)
            out.append(item)
            context.append(token)
        return out

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        def top(ids, probs):
            token, _, _ = most_likely(ids, probs, 1)[0]
            return token, token

        return self._walk(tokens, max_tokens, top)

    def propose_sampled(self, tokens: Sequence[int], max_tokens: int,
                        generator: torch.Generator | None) -> list[tuple[int, dict[int, float]]]:
        """Up to ``max_tokens`` tokens, each drawn from its stored distribution ``q`` (Gumbel-max), with ``q``."""
        draw = gumbel_top_k(generator)

        def one(ids, probs):
            token, q, _ = draw(ids, probs, 1)[0]
            return token, (token, q)

        return self._walk(tokens, max_tokens, one)

    def _context_lookup(self, tokens: Sequence[int]):
        tail = tuple(int(t) for t in tokens[-self.order:])
        return lambda path: self.lookup((*tail, *path)[-self.order:])

    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        if self.shape == "chain":
            return super().propose_tree(tokens, max_depth)
        if self.shape == "delayed":
            shape = delayed_shape(self.trunk, self.branches, self.branch_len)
            return fill_shape(shape, self._context_lookup(tokens), most_likely, max_depth)
        return self._shaped(tokens, max_depth, lambda ids, probs: probs)

    def _expected_acceptance(self, ids, probs) -> list[float]:
        """Under sampling, the score of the ``r``-th drawn child: the measured overlap ``beta`` of the
        current match order, times ``(1 - beta)^r`` (each earlier sibling rejected)."""
        beta = self.overlap[self.last_match_of_lookup - 1][0]
        return [beta * (1.0 - beta) ** r for r in range(len(ids))]

    def _shaped(self, tokens: Sequence[int], max_depth: int, score) -> DraftTree:
        """The best-first / OPT-Tree tree over the tables, candidates scored by ``score(ids, probs)``
        (draft probabilities under greedy decoding, expected acceptance of draws under sampling)."""
        depth = min(max_depth, self.num_tokens)
        lookup = self._context_lookup(tokens)

        def expand(path):
            entry = lookup(path)
            if entry is None:
                return []
            ranked = most_likely(*entry, len(entry[0]))
            scores = score([t for t, _, _ in ranked], [p for _, _, p in ranked])
            return [(t, s, (*path, t)[-self.order:]) for (t, _, _), s in zip(ranked, scores)]

        return shaped_tree(expand, (), shape=self.shape, max_nodes=self.tree_nodes, max_depth=depth,
                           costs=self.costs, who="stand", context=len(tokens),
                           overhead=self.costs.drafter_overhead.get(self.name, 0.0) if self.costs else 0.0)

    def propose_sampled_tree(self, tokens: Sequence[int], max_depth: int,
                             generator: torch.Generator | None) -> DraftTree:
        if self.shape == "chain":
            return super().propose_sampled_tree(tokens, max_depth, generator)
        if self.shape == "delayed":
            shape = delayed_shape(self.trunk, self.branches, self.branch_len)
        else:
            shape = list(self._shaped(tokens, max_depth, self._expected_acceptance).parents)
        return fill_shape(shape, self._context_lookup(tokens), gumbel_top_k(generator), max_depth)
