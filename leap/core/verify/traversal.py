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
chi-square tests in ``tests/core/verify/test_traversal.py`` check this implementation against exact target
distributions, with a negative control.

``M_b`` is kept per node as a scaled row of ``p`` with a few overridden tokens, so a deletion costs
``O(top_k)`` rather than ``O(vocab)``; only the stop node's distribution is materialised, on the device.
The walk reads from the device only the target values it can need (each node's row at its children's
draw supports, gathered there) and the next token: ``O(nodes x top_k)`` values per step, not the
``[rows, V]`` table (8 MB per step at V = 128k in float32).

In leap each node keeps the distribution its own token was drawn from given its earlier siblings
(:attr:`~leap.core.trees.draft_tree.DraftTree.draws`; ``None``: a deterministic proposal, one-hot), which is
``M_s(.|A)`` at the moment that node is examined. Greedy decoding never reaches this module (exact
match, :class:`~leap.core.verify.tree_rules.TreeRule.accept`).

Who calls what: :class:`~leap.core.decoding.decoder.DecodingSession`'s tree step through
:class:`TraversalVerification` (``--tree-verify traversal``).
"""

from __future__ import annotations

import torch

from leap.core.verify.tree_rules import TreeRule, tree_rules

__all__ = ["TraversalVerification", "traversal_accept"]


class _Target:
    """A node's current ``M_b``: ``scale * p[row]`` except at a few tokens (``override``), so that a
    residual update touches only the rejected draw's support (``O(top_k)``, not ``O(vocab)``). ``known``
    holds the values of ``p`` the walk can read (gathered on the device and read once per step)."""

    __slots__ = ("row", "scale", "override", "known")

    def __init__(self, row: int, known: dict[tuple[int, int], float]) -> None:
        self.row, self.scale, self.override, self.known = row, 1.0, {}, known

    def at(self, token: int) -> float:
        value = self.override.get(token)
        return self.scale * self.known[self.row, token] if value is None else value

    def remove(self, p_a: float, q: dict[int, float]) -> float:
        """Replace ``M_b`` by ``norm([p_a M_b - q]_+)`` and return ``S = sum [p_a M_b - q]_+`` (when
        ``S = 0`` there is no residual and ``M_b`` stays as it was)."""
        support = {t: self.at(t) for t in q}
        inside = {t: max(p_a * m - q[t], 0.0) for t, m in support.items()}
        s = p_a * max(1.0 - sum(support.values()), 0.0) + sum(inside.values())
        if s <= 0.0:
            return 0.0
        factor = p_a / s
        self.scale *= factor
        self.override = {t: v * factor for t, v in self.override.items()}
        self.override.update({t: v / s for t, v in inside.items()})
        return s

    def dense(self, p: torch.Tensor) -> torch.Tensor:
        """The whole distribution, on ``p``'s device (only the stop node's is ever made)."""
        out = p[self.row].double() * self.scale
        if self.override:
            ids = torch.tensor(list(self.override), device=p.device)
            out[ids] = torch.tensor(list(self.override.values()), dtype=out.dtype, device=p.device)
        return out.clamp_min(0.0)


def traversal_accept(tree, p: torch.Tensor, generator: torch.Generator | None) -> tuple[list[int], int]:
    """Traversal Verification of ``tree`` against target distributions ``p`` (``[rows, V]``, on any device).

    Returns the accepted rows (root path, root excluded) and the next token. Two host reads: the values of
    ``p`` the walk can need (each node's row at its children's draw supports) with the walk's uniforms, and
    the next token, drawn on the device; ``p`` itself never leaves the device.
    """
    rows = len(tree) + 1
    children = [sorted(tree.children(r).values()) for r in range(rows)]  # draw order = row order
    parent = [0, *tree.parents]
    draws = [None, *({tree.tokens[i]: 1.0} if q is None else q for i, q in enumerate(tree.draws))]
    pairs = sorted({(parent[c], t) for c in range(1, rows) for t in (*draws[c], tree.tokens[c - 1])})
    device = generator.device if generator is not None else p.device
    # every uniform the walk can need (at most two per iteration, one iteration per removed leaf plus the
    # last), drawn from the decoder's generator wherever it lives
    uniforms = torch.rand(2 * rows + 2, generator=generator, dtype=torch.float64, device=device)
    if pairs:
        at = torch.tensor(pairs, device=p.device)
        gathered = p[at[:, 0], at[:, 1]].double()
        values = torch.cat([gathered, uniforms.to(p.device)]).tolist()  # the step's one read of p
    else:
        values = uniforms.tolist()
    known = dict(zip(pairs, values[: len(pairs)]))
    draws_u = iter(values[len(pairs):])
    targets = [_Target(r, known) for r in range(rows)]
    p_a = [1.0] * rows

    def refresh(row: int) -> None:  # p_a below ``row``, top-down
        stack = [row]
        while stack:
            a = stack.pop()
            for c in children[a]:
                token = tree.tokens[c - 1]
                ratio = targets[a].at(token) / max(draws[c].get(token, 0.0), 1e-300)
                p_a[c] = min(p_a[a] * ratio, 1.0)
                stack.append(c)

    refresh(0)

    def uniform() -> float:
        return next(draws_u)

    while True:
        leaf = 0
        while children[leaf]:
            leaf = children[leaf][0]
        if leaf == 0 or uniform() < p_a[leaf]:
            cdf = torch.cumsum(targets[leaf].dense(p), 0)
            u = torch.tensor([uniform()], dtype=cdf.dtype, device=cdf.device)
            token = int(torch.searchsorted(cdf, u * cdf[-1], right=True).clamp(max=len(cdf) - 1).item())
            return (tree.path(leaf) if leaf else []), token
        a = parent[leaf]
        s = targets[a].remove(p_a[a], draws[leaf])
        denom = s + 1.0 - p_a[a]
        p_a[a] = s / denom if denom > 0 else 1.0
        children[a].remove(leaf)
        refresh(a)


@tree_rules.register("traversal")
class TraversalVerification(TreeRule):
    """Traversal Verification (see the module docstring); verifies sampled chains too (Block Verification)."""

    name = "traversal"
    verifies_chains = True
    host_reads_per_step = 2  # the needed target values with the walk's uniforms once, the next token once

    def accept_sampled(self, tree, p, generator):
        return traversal_accept(tree, p, generator)
