"""Sampled draft trees: a fixed *shape* filled with tokens drawn by Gumbel-Top-K.

STAND (Song et al., 2025) drafts the children of a tree node *stochastically*, without replacement,
by Gumbel-Top-K: ``top-k(log q_i + G_i)`` with i.i.d. Gumbel noise ``G_i`` gives the first ``k`` draws
of sampling without replacement from ``q`` (Kool et al., 2019). The ``j``-th child was then drawn from
``q`` with the earlier ``j - 1`` children removed and renormalised; that distribution is kept with the
node (:attr:`~leap.core.trees.draft_tree.DraftTree.draws`), which Traversal Verification needs.

The shape - how many children each node has - is fixed before any token is drawn (a *skeleton*, given
as parent rows), and a node's subtree depends on its own root path only (its context decides its
draft distribution). Shapes come from the drafter: the deterministic best-first / OPT-Tree tree of
the same tables, or :func:`delayed_shape`.

**Delayed tree expansion** (arXiv 2602.16994): draft a single trunk of ``L1`` tokens first and
branch only at its end, ``K`` branches of ``L2`` tokens each (a ``(K, L1, L2)`` tree), verified top-down
by a multi-draft rule, so the target distribution is kept. Here the ``K`` branch heads are drawn
without replacement (Gumbel-Top-K) so the tree holds no duplicate children.

Who calls what: :class:`leap.core.drafters.stand.Stand`, :class:`leap.core.drafters.lowbit.LowBit` and
:class:`leap.heads.drafter.Eagle` (``shape=``) build trees with :func:`fill_shape` - :func:`gumbel_top_k` under sampling, :func:`most_likely` under greedy decoding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from leap.core.trees.draft_tree import DraftTree

__all__ = ["gumbel_top_k", "most_likely", "fill_shape", "delayed_shape", "sibling_shape", "shape_of"]

Entry = tuple[Sequence[int], Sequence[float]]  # candidate ids and their probabilities (summing to 1)
Choose = Callable[[Sequence[int], Sequence[float], int], list[tuple[int, dict[int, float] | None, float]]]


def gumbel_top_k(generator: torch.Generator | None) -> Choose:
    """``choose(ids, probs, k)`` -> up to ``k`` draws without replacement, each ``(token, q_j, q(token))``.

    One ``torch.rand`` call per node (the decoder's generator, so runs are reproducible); the Gumbel keys
    ``log q_i - log(-log U_i)`` are computed in Python (a handful of candidates: cheaper than tensor ops).
    """
    device = "cpu" if generator is None else generator.device

    def choose(ids, probs, k):
        u = torch.rand(len(ids), generator=generator, dtype=torch.float64, device=device).tolist()
        keys = [(math.log(p) - math.log(-math.log(min(max(x, 1e-300), 1.0 - 1e-16))), -i)
                for i, (p, x) in enumerate(zip(probs, u)) if p > 0]
        order = [-i for _, i in sorted(keys, reverse=True)[:k]]
        out, left = [], dict(zip((int(i) for i in ids), (float(p) for p in probs)))
        for i in order:
            mass = sum(left.values())
            q = {t: v / mass for t, v in left.items() if v > 0}
            token = int(ids[i])
            out.append((token, q, float(probs[i])))
            left[token] = 0.0
        return out

    return choose


def most_likely(ids, probs, k):
    """Deterministic choice: the ``k`` most likely candidates (ties by position), draws unrecorded."""
    order = sorted(range(len(ids)), key=lambda r: (-probs[r], r))[:k]
    return [(int(ids[r]), None, float(probs[r])) for r in order if probs[r] > 0]


def fill_shape(shape: Sequence[int], lookup: Callable[[tuple[int, ...]], Entry | None], choose: Choose,
               max_depth: int) -> DraftTree:
    """Fill the skeleton ``shape`` (node ``i``'s parent row, ``0`` = root, siblings in rank order) with
    tokens: at each node, ``lookup(path)`` (path = the tokens from the root's child down to the node)
    gives its candidates, ``choose`` picks as many as the node has children. A node without candidates
    ends its branch. Scores are path products of the candidates' probabilities."""
    kids: list[list[int]] = [[] for _ in range(len(shape) + 1)]
    for i, parent in enumerate(shape):
        kids[parent].append(i + 1)
    tree = DraftTree()
    todo = [(0, 0, (), 1.0, 0)]  # skeleton row, tree row, path, score, depth
    while todo:
        srow, trow, path, score, depth = todo.pop(0)
        if not kids[srow] or depth >= max_depth:
            continue
        entry = lookup(path)
        if entry is None:
            continue
        for child, (token, q, prob) in zip(kids[srow], choose(entry[0], entry[1], len(kids[srow]))):
            row = tree.add(trow, token, q, score * prob)
            todo.append((child, row, (*path, token), score * prob, depth + 1))
    return tree


def delayed_shape(trunk: int, branches: int, branch_len: int) -> list[int]:
    """The skeleton of a ``(K, L1, L2)`` tree: ``trunk`` single children, then ``branches`` chains of
    ``branch_len`` tokens from the trunk's end."""
    shape = list(range(trunk))  # node i+1's parent is row i
    for _ in range(branches if branch_len > 0 else 0):
        parent = trunk
        for _ in range(branch_len):
            shape.append(parent)
            parent = len(shape)
    return shape


def sibling_shape(depth: int, width: int) -> list[int]:
    """The skeleton of a chain of ``depth`` tokens with ``width - 1`` leaf alternatives at every depth
    (node ``i``'s parent row; the first child of each chain node continues the chain)."""
    shape, parent = [], 0
    for _ in range(depth):
        trunk = len(shape) + 1
        shape.extend([parent] * width)
        parent = trunk
    return shape


def shape_of(tree: DraftTree) -> list[int]:
    """A tree's skeleton (its parent rows)."""
    return list(tree.parents)


