"""Traversal Verification (Weng et al., "Traversal Verification for Speculative Tree Decoding",
NeurIPS 2025): lossless verification of a sampled draft tree, bottom-up.

Notation as in the paper: ``M_b`` the target distribution after a node, ``M_s`` the draft distribution
its children were drawn from, ``p_a`` a node's sequence-level acceptance weight:

    p_a(root) = 1,   p_a(X_i) = min(p_a(X_{i-1}) * M_b(x_i | X_{i-1}) / M_s(x_i | X_{i-1}), 1).

Loop: take the first leaf ``X`` in post-order (first child, repeatedly). With probability
``p_a(X)`` accept the whole root path to ``X`` and stop; the next token is drawn from ``M_b(.|X)``
(the target's, or the residual left by deleted children). Otherwise delete ``X`` and update its
parent ``A``:

    S        = sum_x [p_a(A) M_b(x|A) - M_s(x|A)]_+
    M_b(.|A) <- norm([p_a(A) M_b(.|A) - M_s(.|A)]_+)
    p_a(A)   <- S / (S + 1 - p_a(A))
    M_s(.|A) <- the distribution the next sibling was drawn from (without replacement: M_s with the
                rejected token removed, renormalised),

then recompute ``p_a`` below ``A``; a childless ``A`` is a leaf. On a chain this is Block
Verification (Sun et al., 2024); on a one-level tree it is recursive rejection sampling without
replacement. The paper's formulas were gathered second-hand (its code is not public), so the
chi-square tests in ``tests/core/test_traversal.py`` check this implementation against exact target
distributions, with a negative control.

In leap each node keeps the distribution its own token was drawn from given its earlier siblings
(:attr:`~leap.core.draft_tree.DraftTree.draws`; ``None``: a deterministic proposal, one-hot), which is
``M_s(.|A)`` at the moment that node is examined. Greedy decoding never reaches this module (exact
match, :class:`~leap.core.tree_rules.TreeRule.accept`).

Who calls what: :class:`~leap.core.decoder.DecodingSession`'s tree step through
:class:`TraversalVerification` (``--tree-verify traversal``).
"""

from __future__ import annotations

import torch

from leap.core.tree_rules import TreeRule, tree_rules

__all__ = ["TraversalVerification", "traversal_accept"]


def _dense(q: dict[int, float] | None, token: int, like: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(like)
    if q is None:
        out[token] = 1.0
    else:
        out[torch.tensor(list(q), device=like.device)] = torch.tensor(list(q.values()), dtype=like.dtype,
                                                                      device=like.device)
    return out


def traversal_accept(tree, p: torch.Tensor, generator: torch.Generator | None) -> tuple[list[int], int]:
    """Traversal Verification of ``tree`` against target distributions ``p`` (``[rows, V]``).

    Returns the accepted rows (root path, root excluded) and the next token.
    """
    p = p.double()
    rows = len(tree) + 1
    children = [list(tree.children(r).values()) for r in range(rows)]  # draw order = row order
    for c in children:
        c.sort()
    parent = [0, *tree.parents]
    m_b: dict[int, torch.Tensor] = {}  # rows whose M_b was replaced by a residual

    def target(row: int) -> torch.Tensor:
        return m_b.get(row, p[row])

    def q_of(child: int) -> float:
        q = tree.draws[child - 1]
        return 1.0 if q is None else float(q.get(tree.tokens[child - 1], 0.0))

    p_a = [1.0] * rows

    def refresh(row: int) -> None:  # p_a below ``row``, top-down
        stack = [row]
        while stack:
            a = stack.pop()
            mb = target(a)
            for c in children[a]:
                ratio = float(mb[tree.tokens[c - 1]]) / max(q_of(c), 1e-300)
                p_a[c] = min(p_a[a] * ratio, 1.0)
                stack.append(c)

    refresh(0)
    while True:
        leaf = 0
        while children[leaf]:
            leaf = children[leaf][0]
        u = float(torch.rand((), generator=generator, device=generator.device if generator else "cpu").item())
        if leaf == 0 or u < p_a[leaf]:
            path = tree.path(leaf) if leaf else []
            final = target(leaf)
            token = int(torch.multinomial(final.float(), 1, generator=generator).item())
            return path, token
        a = parent[leaf]
        q = _dense(tree.draws[leaf - 1], tree.tokens[leaf - 1], p[0])
        residual = (p_a[a] * target(a) - q).clamp_min(0.0)
        s = float(residual.sum())
        denom = s + 1.0 - p_a[a]
        p_a[a] = s / denom if denom > 0 else 1.0
        if s > 0:
            m_b[a] = residual / s
        children[a].remove(leaf)
        refresh(a)


@tree_rules.register("traversal")
class TraversalVerification(TreeRule):
    """Traversal Verification (see the module docstring); verifies sampled chains too (Block Verification)."""

    name = "traversal"
    verifies_chains = True

    def accept_sampled(self, tree, p, generator):
        return traversal_accept(tree, p, generator)
