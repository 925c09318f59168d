"""Draft trees: several candidate continuations verified in one forward pass (tree attention).

SpecInfer (Miao et al., 2024) and the tree variants of Token Recycling (Luo et al., 2024) and
SuffixDecoding (Oliaro et al., 2024) verify a *tree* of candidate tokens at once: the nodes are fed
as one sequence after the pending token, each node at the position of its depth, and an attention
mask lets every node see the cached context, the pending token and its own ancestors only. Then the
target's token after each node is known, and the longest root path whose every token equals the
target's choice is accepted.

Why on this CPU: a verification of 8 tokens costs ~1.3x one token (``benchmarks/core_bench.py
--section forward``), while a model-free chain accepts only ~1.4-1.8 tokens per step; spending the
same forward on 2-3 alternatives per position accepts more.

Layout (the convention :class:`leap.core.decoding.decoder.DecodingSession` and the drafters share): row 0 is
the root (the pending token, already committed); node ``i`` of :attr:`DraftTree.tokens` is row
``i + 1``; :attr:`DraftTree.parents` gives each node's parent *row* (0 = the root), always a smaller
row, so rows are in topological order and a parent's key/value entry exists before its children
attend to it.

Acceptance is a :class:`~leap.core.verify.tree_rules.TreeRule` (``--tree-verify``). The default,
``match`` (:func:`leap.core.verify.sampling.tree_accept`): at the root, take the target's token (argmax, or
a sample from ``p``); if a child carries it, move there and repeat; otherwise that token is the step's
own next token. Every committed token is then drawn from ``p`` given the committed prefix whatever
the tree holds. ``traversal`` (:mod:`leap.core.verify.traversal`) also uses the draft distributions of
sampled trees: :attr:`DraftTree.draws` keeps, per node, the distribution ``q`` its token was drawn
from (given its earlier siblings), or None for a deterministic proposal (one-hot).

Scores: :attr:`DraftTree.scores` keeps each node's path probability as the drafter estimated it
(the product of its candidates' probabilities along the root path), which OPT-Tree's budget reads
(:mod:`leap.core.trees.opt_tree`); 1.0 where a drafter has no estimate.

Who calls what: drafters build trees in :meth:`leap.core.drafters.base.Drafter.propose_tree`;
the decoder verifies them through :meth:`leap.core.modeling.layers.LayerStack.run_layers` with
:meth:`DraftTree.positions` and :meth:`DraftTree.attention_mask`, then keeps the accepted path's
cache entries with :meth:`leap.core.modeling.kv_cache.LeapKVCache.keep`.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Sequence

import torch

__all__ = ["DraftTree", "best_first_tree"]


class DraftTree:
    """Candidate tokens after the pending token, as a tree (see the module docstring for the layout)."""

    def __init__(self, tokens: Sequence[int] = (), parents: Sequence[int] | None = None) -> None:
        self.tokens: list[int] = []
        self.parents: list[int] = []
        self.draws: list[dict[int, float] | None] = []  # per node: the q its token was drawn from, or None
        self.scores: list[float] = []  # per node: estimated path probability (1.0 when unknown)
        self.depths: list[int] = [0]  # per row; row 0 = root
        self._children: list[dict[int, int]] = [{}]  # per row: token -> child row
        parents = list(range(len(tokens))) if parents is None else list(parents)  # default: a chain
        if len(parents) != len(tokens):
            raise ValueError(f"{len(tokens)} tokens but {len(parents)} parents")
        for token, parent in zip(tokens, parents):
            before = len(self.tokens)
            self.add(parent, token)
            if len(self.tokens) == before:
                raise ValueError(f"token {token} appears twice under row {parent}")

    # ------------------------------------------------------------------ building
    def add(self, parent: int, token: int, q: dict[int, float] | None = None, score: float = 1.0) -> int:
        """The row of ``token`` under ``parent`` (a row), added if new; ``q`` is the distribution the token
        was drawn from (sampled trees), ``score`` its estimated path probability."""
        if not 0 <= parent <= len(self.tokens):
            raise ValueError(f"parent row {parent} does not exist (rows 0..{len(self.tokens)})")
        token = int(token)
        row = self._children[parent].get(token)
        if row is None:
            self.tokens.append(token)
            self.parents.append(parent)
            self.draws.append(q)
            self.scores.append(float(score))
            self.depths.append(self.depths[parent] + 1)
            self._children.append({})
            row = len(self.tokens)
            self._children[parent][token] = row
        return row

    def add_path(self, tokens: Iterable[int], max_nodes: int | None = None, max_depth: int | None = None) -> None:
        """Merge a chain from the root, sharing its common prefix, within ``max_nodes``/``max_depth``."""
        row = 0
        for token in tokens:
            if max_depth is not None and self.depths[row] >= max_depth:
                return
            child = self._children[row].get(int(token))
            if child is None:
                if max_nodes is not None and len(self.tokens) >= max_nodes:
                    return
                child = self.add(row, token)
            row = child

    @classmethod
    def chain(cls, tokens: Sequence[int], draws: Sequence[dict[int, float] | None] | None = None) -> DraftTree:
        """A chain of ``tokens``; ``draws`` their draft distributions (sampled chains)."""
        tree = cls(tokens)
        if draws is not None:
            # a dict is copied; a read-only mapping (a dense draw over the whole vocabulary) is kept as it is
            tree.draws = [dict(q) if isinstance(q, dict) else q for q in draws][: len(tree)]
        return tree

    def prefix(self, nodes: int) -> DraftTree:
        """The tree of the first ``nodes`` nodes (a subtree: parents always precede their children)."""
        out = DraftTree()
        for i in range(min(int(nodes), len(self.tokens))):
            out.add(self.parents[i], self.tokens[i], self.draws[i], self.scores[i])
        return out

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        """Number of nodes (the root not counted)."""
        return len(self.tokens)

    def children(self, row: int) -> dict[int, int]:
        """token -> child row, for ``row`` (0 = root)."""
        return self._children[row]

    @property
    def is_chain(self) -> bool:
        return all(len(c) <= 1 for c in self._children)

    @property
    def depth(self) -> int:
        return max(self.depths)

    def first_chain(self) -> list[int]:
        """The tokens along the first child of every node (the chain a chain-only verifier would take)."""
        out, row = [], 0
        while self._children[row]:
            token, row = next(iter(self._children[row].items()))
            out.append(token)
        return out

    def path(self, row: int) -> list[int]:
        """Rows from the root's child down to ``row``."""
        rows = []
        while row:
            rows.append(row)
            row = self.parents[row - 1]
        return rows[::-1]

    # ------------------------------------------------------------------ verification inputs
    def positions(self, start: int) -> list[int]:
        """Absolute position of every row when the root sits at ``start``."""
        return [start + d for d in self.depths]

    def attention_mask(self, past: int, dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
        """Additive mask ``[1, 1, rows, past + rows]``: all ``past`` cached entries, plus each row's
        ancestors and itself. Built on ``device``: only the ``rows x rows`` ancestry is made on the host and
        copied, never anything of the context's length."""
        rows = len(self.tokens) + 1
        ancestry = [[True] + [False] * (rows - 1)]  # built in Python: one tensor op instead of one per row
        for row in range(1, rows):
            line = list(ancestry[self.parents[row - 1]])
            line[row] = True
            ancestry.append(line)
        hidden = torch.tensor(ancestry, dtype=torch.bool).logical_not_().to(device)
        mask = torch.zeros(rows, past + rows, dtype=dtype, device=device)
        mask[:, past:].masked_fill_(hidden, torch.finfo(dtype).min)
        return mask.view(1, 1, rows, past + rows)

    def __repr__(self) -> str:
        return f"DraftTree(tokens={self.tokens}, parents={self.parents})"


def best_first_tree(
    expand: Callable[[Hashable], Iterable[tuple[int, float, Hashable]]],
    root: Hashable,
    max_nodes: int,
    max_depth: int,
    min_prob: float = 0.0,
) -> DraftTree:
    """Grow a tree by repeatedly adding the candidate with the highest path probability.

    ``expand(state)`` lists ``(token, probability, child_state)`` for the tokens that may follow a
    node in ``state``; a candidate's path probability is the product along its path (SuffixDecoding's
    greedy speculation-tree construction; Token Recycling's static tree is the same idea with
    rank-based probabilities). Stops at ``max_nodes`` nodes; candidates deeper than ``max_depth`` or
    below ``min_prob`` are never added. Ties go to the earlier candidate (deterministic).
    """
    tree = DraftTree()
    heap: list = []
    order = itertools.count()

    def push(row: int, state: Hashable, prob: float) -> None:
        if tree.depths[row] >= max_depth:
            return
        for token, p, child in expand(state):
            path = prob * p
            if path >= min_prob and path > 0:
                heapq.heappush(heap, (-path, next(order), row, int(token), child))

    push(0, root, 1.0)
    while heap and len(tree) < max_nodes:
        neg, _, parent, token, state = heapq.heappop(heap)
        if token in tree.children(parent):
            continue
        push(tree.add(parent, token, score=-neg), state, -neg)
    return tree
