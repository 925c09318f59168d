"""OPT-Tree (Wang et al., 2024, "OPT-Tree: Speculative Decoding with Adaptive Draft Tree Structure"):
the draft tree that maximises the expected acceptance length, sized by the machine's costs.

A node ``v``'s score is the product of the draft probabilities along its root path, ``p(v)``; the
expected number of accepted tokens of a tree is about ``sum_v p(v)``, and the ``n`` nodes with the
largest scores always form a subtree containing the root (a child never scores above its parent).
So the best tree of every size is a prefix of the best-first order
(:func:`leap.core.trees.draft_tree.best_first_tree` adds nodes in exactly that order).

OPT-Tree stops growing when the gain falls below a threshold ``delta`` that it sets between the draft
and target step times. leap replaces the threshold by the quantity it stands for: the step's
expected speed in plain steps,

    (1 + sum_{i <= n} p_i) / (c(n + 1) + overhead),

with ``c`` the verification curve calibrated on the machine at hand
(:class:`~leap.core.decoding.calibrate.Calibration`), maximised over ``n`` (``n = 0``: do not draft, value 1).
On a memory-bound GPU ``c`` is nearly flat and trees grow large; on this project's CPU verifying 16
tokens costs ~1.5 steps and trees stay small. No node budget is a constant in the code: a drafter's cap
is its ``tree_nodes`` when given, else the calibration's
:attr:`~leap.core.runtime.costs.Calibration.max_tree_nodes` (the curve is measured up to 64 tokens for as
long as it keeps paying), and ``c`` is read at the step's context length.

Who calls what: drafters that score their candidates (``stand``, ``suffix``, ``token-recycling``)
with ``shape="opt"`` call :func:`opt_tree` from ``propose_tree`` (``leap bench --method-arg
stand:shape=opt``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence

from leap.core.trees.draft_tree import DraftTree, best_first_tree
from leap.core.errors import SettingsError

__all__ = ["expected_speed", "budget_by_expected_acceptance", "opt_tree", "shaped_tree", "check_shape"]


def expected_speed(scores: Sequence[float], nodes: int, costs, overhead: float = 0.0,
                   context: int | None = None) -> float:
    """Expected committed tokens per plain step of a tree made of the first ``nodes`` of ``scores``, verified
    after ``context`` tokens (``None``: at the calibration's context)."""
    if nodes <= 0:
        return 1.0
    return (1.0 + sum(scores[:nodes])) / (costs.verify(nodes + 1, context) + overhead)


def budget_by_expected_acceptance(scores: Sequence[float], costs, overhead: float = 0.0,
                                  context: int | None = None) -> int:
    """The ``n`` (0..len(scores)) that maximises :func:`expected_speed`; ties go to the smaller tree."""
    best_n, best, total = 0, 1.0, 0.0
    for n, s in enumerate(scores, 1):
        total += float(s)
        value = (1.0 + total) / (costs.verify(n + 1, context) + overhead)
        if value > best + 1e-12:
            best_n, best = n, value
    return best_n


def opt_tree(expand: Callable[[Hashable], Iterable[tuple[int, float, Hashable]]], root: Hashable, *,
             max_depth: int, max_nodes: int, costs, overhead: float = 0.0) -> DraftTree:
    """Best-first tree of at most ``max_nodes`` nodes, cut to the size the costs say pays best."""
    tree = best_first_tree(expand, root, max_nodes, max_depth)
    return tree.prefix(budget_by_expected_acceptance(tree.scores, costs, overhead))


def shaped_tree(expand, root, *, shape: str, max_nodes: int, max_depth: int, costs, overhead: float = 0.0,
                min_prob: float = 0.0, who: str = "this drafter", context: int | None = None) -> DraftTree:
    """A drafter's scored tree: best-first within ``max_nodes`` (``shape="best-first"``), or OPT-Tree's
    cut of it by the calibrated costs at ``context`` tokens (``shape="opt"``)."""
    if shape == "best-first":
        return best_first_tree(expand, root, max_nodes, max_depth, min_prob)
    if shape != "opt":
        raise ValueError(f"unknown tree shape {shape!r}")
    if costs is None:
        raise SettingsError(f"{who} with shape='opt' needs the machine's costs: run it in a decoder session "
                            "(which calls use_costs) or call use_costs(calibration) first")
    tree = best_first_tree(expand, root, max_nodes, max_depth, min_prob)
    return tree.prefix(budget_by_expected_acceptance(tree.scores, costs, overhead, context))


def check_shape(shape: str, who: str, shapes: tuple[str, ...] = ("best-first", "opt")) -> str:
    """``shape`` if it is one of ``shapes``, else a SettingsError naming the choices."""
    if shape not in shapes:
        raise SettingsError(f"{who}: shape must be one of {', '.join(shapes)}, got {shape!r}")
    return shape
