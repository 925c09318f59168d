"""Tree verification rules: which root path of a draft tree a step keeps, and the token after it.

A :class:`TreeRule` turns the verifier's logits over a :class:`~leap.core.trees.draft_tree.DraftTree` into
(accepted rows, next token). Under greedy decoding every rule is exact match (the target's argmax,
followed as long as a child carries it), so greedy output is plain decoding's token for token; rules
differ only under sampling, where each must keep the target distribution exactly.

Built in (``--tree-verify NAME``):

* ``match`` (default): sample the target's token at the root, move to the child that carries it,
  repeat (:func:`leap.core.verify.sampling.tree_accept`). Lossless for any tree whose construction does not
  look at the target's draws; it ignores the draft distributions. Chains keep the chain rule
  (Leviathan et al.'s speculative sampling with the draft's ``q``).
* ``traversal``: Traversal Verification (Weng et al., NeurIPS 2025; :mod:`leap.core.verify.traversal`),
  which uses the draft distributions of sampled trees (:attr:`DraftTree.draws`) and verifies chains
  too (there it is Block Verification).

Extension point: subclass :class:`TreeRule`, implement :meth:`TreeRule.accept_sampled`, register it
with ``@tree_rules.register("name")``; the contract tests (``tests/core/verify/test_tree_rules.py``) then
run it through the chi-square and greedy-identity tests with the built-ins.

Who calls what: :class:`leap.core.decoding.decoder.SelfSpecDecoder` (``tree_verify=``) holds one rule; its
sessions call :meth:`TreeRule.accept` in their tree step.
"""

from __future__ import annotations

from typing import Any

import torch

from leap.core.registry import Registry
from leap.core.verify.sampling import SamplingSettings, target_probs, tree_accept

__all__ = ["TreeRule", "TokenMatch", "tree_rules", "make_tree_rule"]


class TreeRule:
    """Base class: :meth:`accept` does greedy exact match and hands sampling to :meth:`accept_sampled`."""

    name = "base"
    #: True: under sampling the decoder sends model-free *chains* through this rule as well (as one-path
    #: trees) instead of the chain rule; False: chains keep speculative sampling
    verifies_chains = False
    #: the most host reads of device tensors (syncs on a GPU) one :meth:`accept` makes (greedy exact
    #: match: one, every row's argmax at once); ``tests/core/runtime/test_host_reads.py`` enforces it
    host_reads_per_step = 1

    def accept(self, tree, logits: torch.Tensor, settings: SamplingSettings,
               generator: torch.Generator | None) -> tuple[list[int], int]:
        """``logits[r]``: the target's logits after row ``r`` (row 0 = the pending token). Returns the
        accepted rows (a root path, root excluded) and the next token."""
        if settings.greedy:
            return tree_accept(tree, logits, settings, generator)
        return self.accept_sampled(tree, target_probs(logits, settings), generator)

    def accept_sampled(self, tree, p: torch.Tensor, generator: torch.Generator | None) -> tuple[list[int], int]:
        """Under sampling: ``p[r]`` is the target distribution after row ``r`` (temperature/top-p applied)."""
        raise NotImplementedError


tree_rules: Registry[type[TreeRule]] = Registry("tree verification rule", "leap.tree_rules",
                                                ("leap.core.verify.tree_rules", "leap.core.verify.traversal"))


@tree_rules.register("match")
class TokenMatch(TreeRule):
    """Sample the target's token at each node and follow the child that carries it (SpecInfer's
    multi-candidate rule for deterministic drafts)."""

    name = "match"

    def accept(self, tree, logits, settings, generator):
        # target distributions only for the rows the walk visits (tree_accept computes them lazily)
        return tree_accept(tree, logits, settings, generator)

    def accept_sampled(self, tree, p, generator):
        rows: list[int] = []
        row = 0
        while True:
            token = int(torch.multinomial(p[row], 1, generator=generator).item())
            child = tree.children(row).get(token)
            if child is None:
                return rows, token
            rows.append(child)
            row = child


def make_tree_rule(rule: str | TreeRule | None, **kwargs: Any) -> TreeRule:
    """A rule instance: ``rule`` itself, the registered one called ``rule``, or ``match`` for None."""
    if isinstance(rule, TreeRule):
        return rule
    return tree_rules.create(rule or "match", **kwargs)
