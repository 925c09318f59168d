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


# Target and draft by depth only (p(.|prefix) depends on len(prefix)), chosen by a search over random
# tables for the largest effect of a wrong deletion update (``p_a <- min(S, 1)`` instead of
# ``S / (S + 1 - p_a)``): with it the first two tokens move by ~0.2 in total variation, so N = 3000 sees it
# (the random tables above need ~15000).
DESIGNED = {
    "chain": ([0, 1], [[0.046, 0.952, 0.002], [0.047, 0.336, 0.617], [0.223, 0.405, 0.372]],
              [[0.002, 0.987, 0.011], [0.261, 0.032, 0.707], [0.285, 0.558, 0.157]]),
    "tree": ([0, 0, 1], [[0.832, 0.137, 0.031], [0.575, 0.023, 0.402], [0.299, 0.644, 0.057]],
             [[0.989, 0.010, 0.001], [0.798, 0.131, 0.071], [0.011, 0.981, 0.008]]),
}


@pytest.mark.parametrize("name", sorted(DESIGNED))
def test_the_deletion_update_is_exact_on_a_designed_target(name):
    shape, p_rows, q_rows = DESIGNED[name]
    P, Q = torch.tensor(p_rows).double(), torch.tensor(q_rows).double()
    P, Q = P / P.sum(-1, keepdim=True), Q / Q.sum(-1, keepdim=True)
    g = torch.Generator().manual_seed(0)
    counts = torch.zeros(V * V)
    for _ in range(3000):
        tree = fill_shape(shape, lambda path: (list(range(V)), Q[len(path)].tolist()), gumbel_top_k(g), 10)
        p = torch.stack([P[min(tree.depths[r], len(P) - 1)] for r in range(len(tree) + 1)])
        rows, token = traversal_accept(tree, p, g)
        out = tuple(tree.tokens[r - 1] for r in rows) + (token,)
        if len(out) < 2:  # nothing accepted: the second token comes from the target after one token
            out += (int(torch.multinomial(P[1].float(), 1, generator=g)),)
        counts[out[0] * V + out[1]] += 1
    assert _chi2_pvalue(counts, torch.outer(P[0], P[1]).flatten().float()) > 1e-3


def test_the_walk_reads_only_the_target_values_it_needs():
    """Issue 20: the ``[rows, V]`` target table stays on the device; a step reads the values at the drafted
    supports (with the walk's uniforms) and the next token - two reads, O(nodes x top-k) values, whatever V."""
    from leap.core.runtime.host_reads import HostReads

    vocab, g = 100_000, torch.Generator().manual_seed(0)
    support = [7, 11, 13, 17]
    tree = fill_shape(SHAPES["tree"], lambda path: (support, [0.4, 0.3, 0.2, 0.1]), gumbel_top_k(g), 10)
    p = torch.softmax(torch.randn(len(tree) + 1, vocab, generator=g), dim=-1)
    with HostReads() as reads:
        rows, token = traversal_accept(tree, p, g)
    assert reads.total == 2, reads.report()
    nodes = len(tree)
    assert reads.bytes <= 8 * (nodes * len(support) + 2 * (nodes + 1) + 2) + 8, reads.report()
    assert 0 <= token < vocab and (not rows or rows == tree.path(rows[-1]))
