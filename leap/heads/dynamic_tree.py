"""EAGLE-2's dynamic draft tree (Li et al., 2024, "EAGLE-2: Faster Inference of Language Models with
Dynamic Draft Trees"), for heads that draft from features.

EAGLE-2 observes that a draft head's confidence approximates its acceptance rate, so a node's *value*
- the product of the confidences along its root path - estimates the chance that the verifier accepts
it. The tree is grown in two phases:

* **expansion**: at each depth the ``width`` nodes of the newest layer with the highest values are fed
  to the head in one pass (tree attention over their ancestors), and each proposes its ``width`` most
  likely children;
* **reranking**: after ``depth`` layers, the ``max_nodes`` highest-valued nodes of everything drafted
  form the tree. A child never scores above its parent, so they form a subtree containing the root.

leap sizes the tree by the machine instead of a fixed ``max_nodes`` when a calibration is given: the
reranked nodes are cut where OPT-Tree's expected speed ``(1 + sum p) / (c(n + 1) + overhead)`` peaks
(:func:`leap.core.trees.opt_tree.budget_by_expected_acceptance`), with ``c`` the calibrated
verification curve - large trees on a memory-bound GPU, small ones on a CPU.

Who calls what: :class:`leap.heads.drafter.Eagle` (``shape="eagle2"`` or ``"opt"``) calls
:func:`dynamic_tree` from ``propose_tree`` with an ``expand`` callback that runs its head over a layer of
nodes; the rows of the returned :class:`~leap.core.trees.draft_tree.DraftTree` are in value order (so
any prefix of it is the best tree of that size) and carry their values as ``scores``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import torch

from leap.core.trees.draft_tree import DraftTree
from leap.core.trees.opt_tree import budget_by_expected_acceptance

__all__ = ["Candidate", "dynamic_tree", "top_candidates"]


@dataclass
class Candidate:
    """A drafted node: its token, value (path probability), parent candidate (-1: the root) and depth."""

    token: int
    value: float
    parent: int
    depth: int


#: ``expand(layer)`` -> for each candidate of ``layer`` (indices into the candidate list, all of one
#: depth), its children as ``(token ids, draft probabilities)``, most likely first
Expand = Callable[[list[int], list[Candidate]], list[tuple[Sequence[int], Sequence[float]]]]


def dynamic_tree(first: tuple[Sequence[int], Sequence[float]], expand: Expand, *, depth: int, width: int,
                 max_nodes: int, costs=None, overhead: float = 0.0,
                 stop_tokens: Collection[int] = (), context: int | None = None) -> DraftTree:
    """EAGLE-2's tree: ``first`` are the root's candidates (ids, probabilities); ``expand`` the head's pass
    over one layer of nodes. Nodes carrying a ``stop_tokens`` token (end of sequence) are never expanded.
    With ``costs`` (a :class:`~leap.core.runtime.costs.Calibration`) the tree is cut by OPT-Tree's budget."""
    candidates: list[Candidate] = []
    layer: list[int] = []
    for token, p in list(zip(*first))[:width]:
        if p > 0.0:
            candidates.append(Candidate(int(token), float(p), -1, 1))
            layer.append(len(candidates) - 1)
    for d in range(2, depth + 1):
        frontier = sorted((i for i in layer if candidates[i].token not in stop_tokens),
                          key=lambda i: (-candidates[i].value, i))[:width]
        if not frontier:
            break
        layer = []
        for i, (ids, probs) in zip(frontier, expand(frontier, candidates)):
            for token, p in list(zip(ids, probs))[:width]:
                if p > 0.0:
                    candidates.append(Candidate(int(token), candidates[i].value * float(p), i, d))
                    layer.append(len(candidates) - 1)
    # reranking: highest values first; a tie keeps creation order, so a parent precedes its children
    order = sorted(range(len(candidates)), key=lambda i: (-candidates[i].value, i))[:max_nodes]
    tree, row_of = DraftTree(), {-1: 0}
    for i in order:
        c = candidates[i]
        row_of[i] = tree.add(row_of[c.parent], c.token, score=c.value)
    if costs is not None:
        tree = tree.prefix(budget_by_expected_acceptance(tree.scores, costs, overhead, context))
    return tree


def top_candidates(logits: torch.Tensor, width: int) -> list[tuple[list[int], list[float]]]:
    """Each row of ``logits`` (``[q, V]``): its ``width`` most likely tokens and their probabilities, most likely
    first, in one host read - what :func:`dynamic_tree`'s ``first`` and ``expand`` hand back."""
    top = torch.topk(torch.softmax(logits.float(), dim=-1), min(width, logits.shape[-1]), dim=-1)
    ids, probs = torch.stack([top.indices.double(), top.values.double()]).tolist()
    return [([int(t) for t in i], p) for i, p in zip(ids, probs)]
