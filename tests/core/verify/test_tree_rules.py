"""Tree verification rules (leap.core.verify.tree_rules): every registered rule keeps the target distribution
under sampling and is plain decoding token for token under greedy decoding.

Contract tests: each registered rule runs through them automatically. Distribution: three-token outputs
of a tiny model at T = 1, chi-square against the exact target distribution (p > 1e-3), for a fixed
tree of deterministic drafts, stand's sampled best-first trees, delayed expansion trees and (rules that
verify chains) stand's sampled chains; each tree kind also has a negative control, a rule biased
towards the first child, which must fail the same test (p < 1e-6).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core import SelfSpecDecoder
from leap.core.trees.draft_tree import DraftTree
from leap.core.drafters import Drafter, make_drafter
from leap.core.verify.sampling import SamplingSettings
from leap.core.verify.tree_rules import TokenMatch, TreeRule, make_tree_rule, tree_rules
from tests.core.verify.test_sampling import _chi2_pvalue, _exact_three_token_distribution
from tests.tiny import tiny_model

V, N = 6, 1000
PROMPT = [4, 1, 3]


class Branches(Drafter):
    """A fixed branching tree of deterministic drafts."""

    name = "branches"

    def propose_tree(self, tokens, max_depth):
        tree = DraftTree()
        for path in ([2, 1], [2, 3], [5, 0], [1]):
            tree.add_path(path, max_depth=max_depth)
        return tree


class FirstChild(TreeRule):
    """Negative control: accepts the first child of the root whenever there is one."""

    name = "first-child"
    verifies_chains = True

    def accept_sampled(self, tree, p, generator):
        children = sorted(tree.children(0).values())
        if not children:
            return [], int(torch.multinomial(p[0], 1, generator=generator).item())
        return [children[0]], int(torch.multinomial(p[children[0]], 1, generator=generator).item())


# tree kinds: a drafter factory (fresh state per sampling run); top_k=3 keeps stand's q unlike p
KINDS = {
    "fixed-tree": lambda: Branches(),
    "stand-best-first": lambda: make_drafter("stand", order=2, top_k=3, shape="best-first", tree_nodes=5),
    "stand-delayed": lambda: make_drafter("stand", order=2, top_k=3, shape="delayed", trunk=1, branches=2,
                                          branch_len=1),
    "stand-chain": lambda: make_drafter("stand", order=2, top_k=2),
    # an EAGLE head's sampled tree (a fixed skeleton; each node's children drawn from the head's own q)
    "eagle-delayed": lambda: make_drafter("eagle", head="untrained", top_k=3, shape="delayed", trunk=1, branches=2,
                                          branch_len=1),
}


@pytest.fixture(scope="module")
def model_and_exact():
    model = tiny_model("llama", vocab=V, eos_token_id=None, init=0.3)
    return model, _exact_three_token_distribution(model, PROMPT, SamplingSettings(1.0, 1.0))


def _sample(model, drafter, rule, seed=7, n=N):
    decoder = SelfSpecDecoder(model, None, drafter=drafter, tree_verify=rule)
    counts = torch.zeros(V**3)
    gen = torch.Generator().manual_seed(seed)
    accepted = 0
    for _ in range(n):
        out = decoder.generate(PROMPT, max_new_tokens=3, generator=gen, temperature=1.0)
        a, b, c = out.token_ids
        counts[(a * V + b) * V + c] += 1
        accepted += sum(s.accepted for s in out.steps)
    return counts, accepted


@pytest.mark.parametrize("rule", tree_rules.names())
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_rule_keeps_the_target_distribution(model_and_exact, rule, kind):
    model, exact = model_and_exact
    if kind == "stand-chain" and not tree_rules.get(rule).verifies_chains:
        pytest.skip(f"{rule} leaves chains to speculative sampling (tested in test_stand.py)")
    counts, accepted = _sample(model, KINDS[kind](), rule)
    assert accepted > N // 4  # the trees are really drafted and accepted
    assert _chi2_pvalue(counts, exact) > 1e-3


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_rule_biased_to_the_first_child_fails_the_same_test(model_and_exact, kind):
    model, exact = model_and_exact
    counts, _ = _sample(model, KINDS[kind](), FirstChild(), n=600)  # a gross bias: p <= 1e-13 at 600 samples
    assert _chi2_pvalue(counts, exact) < 1e-6


@pytest.mark.parametrize("rule", tree_rules.names())
@settings(max_examples=10, deadline=None)
@given(prompt=st.lists(st.integers(4, 9), min_size=2, max_size=12), n=st.integers(1, 20),
       kind=st.sampled_from(sorted(KINDS)))
def test_every_rule_is_plain_decoding_under_greedy(tiny_llama, rule, prompt, n, kind):
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=n)
    decoder = SelfSpecDecoder(tiny_llama, None, drafter=KINDS[kind](), tree_verify=rule)
    for _ in range(2):  # the second run drafts from what the first taught the drafter
        assert decoder.generate(prompt, max_new_tokens=n).token_ids == plain.token_ids


def test_unknown_rules_name_the_registered_ones():
    from leap.core.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="match"):
        make_tree_rule("nope")
    assert isinstance(make_tree_rule(None), TokenMatch)
