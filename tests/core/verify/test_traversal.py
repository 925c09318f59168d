"""Traversal Verification (leap.core.verify.traversal) against an exact target, without a model.

A tabular target ``p(.|prefix)`` and draft ``q(.|prefix)`` over 3 tokens (random, fixed by a crc32 of the
prefix); each step fills a tree shape with Gumbel-Top-K draws from ``q`` (as stand does), verifies it
and appends the accepted tokens and the next one. The first three output tokens must follow
``p(a) p(b|a) p(c|a,b)`` exactly (chi-square, p > 1e-3) for chains (Block Verification), one-level
trees (recursive rejection sampling without replacement), general trees and delayed-expansion trees.
Negative control: the same rule without the residual update (the stop node samples its original
target) must fail (p < 1e-6).
"""

from __future__ import annotations

import zlib

import pytest
import torch

import leap.core.verify.traversal as traversal
from leap.core.trees.stochastic_tree import delayed_shape, fill_shape, gumbel_top_k
from leap.core.verify.traversal import traversal_accept
from tests.core.verify.test_sampling import _chi2_pvalue

V = 3
SHAPES = {"chain": [0, 1, 2], "star": [0, 0, 0], "tree": [0, 0, 1, 1, 2], "delayed": delayed_shape(1, 2, 2)}


def _dist(prefix: tuple, salt: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(zlib.crc32(repr((salt, prefix)).encode()))
    x = (-torch.log(torch.rand(V, generator=g))) ** (1 / 0.6)  # uneven, so q and p differ visibly
    return (x / x.sum()).double()


def _exact() -> torch.Tensor:
    return torch.tensor([float(_dist((), "p")[a] * _dist((a,), "p")[b] * _dist((a, b), "p")[c])
                         for a in range(V) for b in range(V) for c in range(V)])


def _outputs(shape, rule, n=3000, seed=0) -> tuple[torch.Tensor, float]:
    g = torch.Generator().manual_seed(seed)
    counts, accepted, steps = torch.zeros(V**3), 0, 0
    for _ in range(n):
        out: tuple = ()
        while len(out) < 3:
            tree = fill_shape(shape, lambda path: (list(range(V)), _dist(out + path, "q").tolist()), gumbel_top_k(g), 10)
            paths = {0: ()}
            for r in range(1, len(tree) + 1):
                paths[r] = paths[tree.parents[r - 1]] + (tree.tokens[r - 1],)
            p = torch.stack([_dist(out + paths[r], "p") for r in range(len(tree) + 1)])
            rows, token = rule(tree, p, g)
            assert rows == tree.path(rows[-1]) if rows else True  # a root path
            out = out + tuple(tree.tokens[r - 1] for r in rows) + (token,)
            accepted, steps = accepted + len(rows), steps + 1
        a, b, c = out[:3]
        counts[(a * V + b) * V + c] += 1
    return counts, accepted / steps


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_traversal_verification_keeps_the_target_distribution(shape):
    counts, mean_accepted = _outputs(SHAPES[shape], traversal_accept)
    assert mean_accepted > 0.3  # drafts really get accepted
    assert _chi2_pvalue(counts, _exact()) > 1e-3


def test_without_the_residual_update_the_same_test_fails():
    def no_residual(tree, p, generator):
        rows, _ = traversal.traversal_accept(tree, p, generator)
        stop = rows[-1] if rows else 0
        return rows, int(torch.multinomial(p[stop].float(), 1, generator=generator).item())

    counts, _ = _outputs(SHAPES["tree"], no_residual)
    assert _chi2_pvalue(counts, _exact()) < 1e-6


def test_a_tree_accepts_at_least_as_much_as_its_first_chain():
    """With the same draws, the tree's extra branches only add acceptance (more children to fall back on)."""
    _, chain = _outputs([0, 1], traversal_accept, n=1500, seed=1)
    _, tree = _outputs([0, 0, 1, 2], traversal_accept, n=1500, seed=1)
    assert tree > chain
