"""Model-free drafters: the prompt-lookup rule, and losslessness for every registered drafter."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core import LayerConfig, SelfSpecDecoder
from leap.core.drafters import Drafter, Hybrid, PromptLookup, SuffixDrafter, SuffixTrie, TokenRecycling, drafters, make_drafter
from leap.core.errors import SettingsError

# small alphabets make n-gram matches (and so real drafts) frequent
repetitive_prompts = st.lists(st.integers(4, 9), min_size=2, max_size=16)


def test_prompt_lookup_takes_the_longest_ngram_and_the_earliest_match():
    pld = PromptLookup(max_ngram=3, num_tokens=4)
    assert pld.propose([1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 2, 3], 10) == [9, 9, 1, 2]  # bigram [2,3], earliest
    assert pld.propose([5, 6, 7, 1, 6, 7, 2, 5, 6, 7], 10) == [1, 6, 7, 2]  # trigram [5,6,7] wins
    assert pld.propose([1, 2, 3, 4], 10) == []  # no earlier occurrence
    assert pld.propose([1, 2, 1, 2], 1) == [1]  # max_tokens
    with pytest.raises(SettingsError):
        PromptLookup(min_ngram=0)


MODEL_FREE = {"prompt-lookup", "token-recycling", "suffix", "stand"}
# every registered drafter with its defaults, plus the model-free ones drafting trees, and the tree shapes
# by expected acceptance (OPT-Tree, under the calibrated costs) and delayed expansion
DRAFTER_CASES = [(name, dict(drafters.get(name).example_kwargs)) for name in drafters.names()] + [
    (name, {"tree_nodes": 6}) for name in sorted(MODEL_FREE - {"stand"})] + [
    ("stand", {"shape": "best-first", "tree_nodes": 6}), ("stand", {"shape": "opt"}), ("stand", {"shape": "delayed"}),
    ("suffix", {"shape": "opt"}), ("token-recycling", {"shape": "opt"}),
    ("eagle", {"head": "untrained", "online": True, "online_every": 2}),  # heads that train while they draft
    ("exit-head", {"head": "untrained", "online": True, "online_every": 2}),
    ("exit-head", {"head": "untrained", "shape": "eagle2", "tree_nodes": 6}),  # trees through the layers below k
    ("eagle", {"head": "untrained", "shape": "delayed", "trunk": 1, "branches": 2})]  # a skeleton tree


@pytest.mark.parametrize("name, kwargs", DRAFTER_CASES, ids=lambda v: v if isinstance(v, str) else str(v or ""))
@settings(max_examples=25)
@given(prompt=repetitive_prompts, n=st.integers(1, 24), skip=st.sets(st.integers(1, 4), max_size=3),
       temperature=st.sampled_from([0.0]))
def test_every_drafter_is_lossless_under_greedy_decoding(tiny_any, name, kwargs, prompt, n, skip, temperature):
    """Greedy output equals plain decoding for every registered drafter (and the tree-drafting
    variants), with a layer-skip config given (used by layer-skip and hybrid, ignored by model-free
    drafters), on one decoder reused across prompts."""
    plain = SelfSpecDecoder(tiny_any, None).generate(prompt, max_new_tokens=n)
    config = LayerConfig.from_sets(tiny_any.num_layers, skip=sorted(skip))
    decoder = SelfSpecDecoder(tiny_any, config, drafter=name, drafter_kwargs=kwargs)
    for _ in range(2):  # the second run starts with state (recycled tokens, earlier outputs) from the first
        out = decoder.generate(prompt, max_new_tokens=n)
        assert out.token_ids == plain.token_ids
        assert sum(out.accepted_lengths) == out.new_tokens
    if name in MODEL_FREE:
        assert out.layers_per_draft_token == 0.0  # model-free: no layer evaluations while drafting


def test_prompt_lookup_drafts_and_gets_accepted_on_repetitive_text(tiny_llama):
    prompt = [5, 6, 7, 8] * 4
    out = SelfSpecDecoder(tiny_llama, None, drafter="prompt-lookup").generate(prompt, max_new_tokens=30)
    assert out.draft_tokens_proposed > 0 and out.config == "drafter:prompt-lookup"


def test_unknown_drafter_lists_the_registered_ones(tiny_llama):
    from leap.core.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="registered: cascade, eagle, exit-head, gated, hybrid, layer-skip, lowbit, prompt-lookup, select"):
        make_drafter("nope")


# ---------------------------------------------------------------- token recycling
def test_token_recycling_follows_recycled_top1_successors():
    tr = TokenRecycling(top_k=2, num_tokens=4)
    assert tr.propose([1, 2], 5) == []  # nothing observed yet
    logits = torch.full((3, 10), -1.0)
    logits[0, 7], logits[0, 8] = 5.0, 4.0  # after token 2: 7 then 8
    logits[1, 9] = 5.0  # after token 7: 9
    logits[2, 2] = 5.0  # after token 9: 2 (a cycle)
    tr.observe([2, 7, 9], logits)
    assert tr.matrix[2].tolist() == [7, 8] and tr.matrix[7, 0] == 9
    assert tr.propose([5, 2], 10) == [7, 9, 2, 7]  # follows the chain, capped by num_tokens
    assert tr.propose([5, 2], 2) == [7, 9]
    assert tr.propose([5, 3], 10) == []  # no row for 3


@settings(max_examples=5)
@given(prompt=repetitive_prompts)
def test_token_recycling_memory_is_bounded_and_updates_deterministic(tiny_llama, prompt):
    runs = []
    for _ in range(2):
        tr = TokenRecycling(top_k=4)
        decoder = SelfSpecDecoder(tiny_llama, None, drafter=tr)
        for _ in range(2):
            decoder.generate(prompt, max_new_tokens=40)
        assert tr.matrix.shape == (tiny_llama.vocab_size, 4) and tr.nbytes == tiny_llama.vocab_size * 4 * 4
        runs.append(tr.matrix.copy())
    assert (runs[0] == runs[1]).all()


# ---------------------------------------------------------------- suffix
def test_suffix_trie_counts_every_bounded_substring():
    trie = SuffixTrie(max_depth=3)
    trie.add([1, 2, 1, 2])
    root = trie.children[0]
    assert trie.count[root[1]] == 2 and trie.count[root[2]] == 2
    one_two = trie.children[root[1]][2]
    assert trie.count[one_two] == 2 and trie.count[trie.children[one_two][1]] == 1
    assert max(trie.depth) == 3
    node, length = trie.match([9, 1, 2])  # "1 2" occurred, followed by 1
    assert length == 2 and trie.continuation(node, 5, 0.0) == [1]  # depth 3 leaves one token after "1 2"
    node, length = trie.match([9, 1, 2], max_length=1)  # "2" was followed by "1 2"
    assert length == 1 and trie.continuation(node, 5, 0.0) == [1, 2]


@settings(max_examples=60, deadline=None)
@given(streams=st.lists(st.lists(st.integers(0, 4), max_size=30), min_size=1, max_size=4), max_depth=st.integers(1, 6))
def test_suffix_trie_counts_are_the_occurrences_of_every_bounded_substring(streams, max_depth):
    """The trie's invariant: its root-to-node paths are exactly the substrings of at most ``max_depth`` tokens of
    the streams added (none spanning two streams), each node's count their number of occurrences, its depth their
    length."""
    from collections import Counter

    trie = SuffixTrie(max_depth=max_depth)
    for stream in streams:
        trie.add(stream)
    expected = Counter(tuple(s[i:j]) for s in streams for i in range(len(s))
                       for j in range(i + 1, min(i + max_depth, len(s)) + 1))
    got, stack = {}, [(0, ())]
    while stack:
        node, path = stack.pop()
        for token, child in trie.children[node].items():
            got[path + (token,)] = trie.count[child]
            assert trie.depth[child] == len(path) + 1
            stack.append((child, path + (token,)))
    assert got == dict(expected) and len(trie) == len(expected) + 1


def test_suffix_drafter_prefers_the_longest_match_and_frequent_continuations():
    sd = SuffixDrafter(max_depth=8, max_match=4, num_tokens=6, alpha=3.0, min_prob=0.0)
    # "5 6" was followed by 7 twice and by 8 once; the longest matching suffix is "5 6"
    assert sd.propose([5, 6, 7, 1, 5, 6, 8, 2, 5, 6, 7, 3, 5, 6], 10)[:1] == [7]
    sd.begin([1, 2, 3])
    assert sd.propose([1, 2, 3], 10) == []  # no earlier occurrence of any suffix
    # the finished request's output (after its prompt) is in the global trie for the next request
    sd.propose([1, 2, 3, 40, 41, 42, 43], 10)
    sd.begin([9])
    assert sd.propose([9, 40, 41], 10) == [42, 43]


@settings(max_examples=5)
@given(prompt=repetitive_prompts)
def test_suffix_global_trie_stays_within_max_nodes(tiny_llama, prompt):
    sd = SuffixDrafter(max_depth=6, max_match=3, max_nodes=300)
    decoder = SelfSpecDecoder(tiny_llama, None, drafter=sd)
    outs = [decoder.generate(prompt, max_new_tokens=60).token_ids for _ in range(4)]
    sd.begin([1])  # retire the last output
    assert len(sd.global_) <= 300
    assert sum(map(len, sd.outputs)) <= sum(map(len, outs))
    again = SuffixDrafter(max_depth=6, max_match=3, max_nodes=300)
    for out in outs:
        again.begin(prompt)
        again.propose([*prompt, *out], 1)
    again.begin([1])
    assert again.global_.count == sd.global_.count  # deterministic for the same history


# ---------------------------------------------------------------- hybrid
def test_hybrid_lets_the_layer_draft_continue_when_the_free_part_is_empty(tiny_llama):
    config = LayerConfig.from_sets(tiny_llama.num_layers, skip=[2])
    prompt = [5, 6, 7, 8] * 3 + [9]
    out = SelfSpecDecoder(tiny_llama, config, drafter=Hybrid("prompt-lookup", min_free=3)).generate(
        prompt, max_new_tokens=30)
    assert out.layers_per_draft_token > 0 and out.config.startswith("drafter:hybrid+")
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=30)
    assert out.token_ids == plain.token_ids
    with pytest.raises(SettingsError):
        Hybrid("layer-skip")


def test_gated_withholds_drafts_in_buckets_that_did_not_pay_and_retries_them():
    from leap.core.drafters import Gated

    gated = Gated("prompt-lookup", min_accept=0.5, retry=3, prior=1.0, decay=0.5, num_tokens=2)
    tokens = [1, 2, 3, 1, 2]  # bigram [1, 2] matches: bucket 2
    assert gated.propose(tokens, 5) == [3, 1] and gated.bucket(2) == 2
    gated.feedback(2, 0)  # mean of bucket 2: 1.0 -> 0.0 (first draft: rate 1)
    withheld = [gated.propose(tokens, 5) for _ in range(3)]
    assert withheld == [[], [], [3, 1]]  # withheld twice, retried on the third
    gated.feedback(2, 2)
    assert gated.mean[2] == pytest.approx(1.0) and gated.propose(tokens, 5) == [3, 1]
    gated.feedback(0, 0)  # a step it did not draft in changes nothing
    assert gated.mean[2] == pytest.approx(1.0)
    with pytest.raises(SettingsError):
        Gated("hybrid")


def test_select_scores_every_candidate_counterfactually_and_drafts_with_the_best():
    from leap.core.trees.draft_tree import DraftTree
    from leap.core.drafters import Select
    from leap.core.drafters.select import accepted_along

    class Fixed(Drafter):
        def __init__(self, tokens):
            self.tokens = tokens

        def propose(self, tokens, max_tokens):
            return self.tokens[:max_tokens]

    tree = DraftTree()
    tree.add_path([1, 2, 3])
    tree.add_path([1, 4])
    assert accepted_along(tree, [1, 4, 9]) == 2 and accepted_along(tree, [5]) == 0 and accepted_along(tree, []) == 0

    good, bad = Fixed([7, 7]), Fixed([8, 8])
    select = Select([bad, good], prior=1.0, overhead=0.2, per_token=0.0)
    select.begin([1])
    history = [1]
    for _ in range(6):  # the text is all 7s: good's drafts would be fully accepted, bad's never
        select.propose(history, 4)
        select.feedback(2, 0)
        history.append(7)
    assert select.mean[(1, 2)] > 1.5 and select.mean[(0, 2)] < 0.2
    assert select.propose(history, 4) == [7, 7]  # good is chosen
    only_bad = Select([Fixed([8, 8])], prior=1.0, overhead=0.2, per_token=0.0)
    only_bad.begin([1])
    history = [1]
    for _ in range(6):
        only_bad.propose(history, 4)
        history.append(7)
    assert only_bad.propose(history, 4) == [] and only_bad.withheld >= 1  # drafting does not pay: plain step
    with pytest.raises(SettingsError, match="model-free"):
        Select("suffix;hybrid")


def test_gated_threshold_is_the_calibrated_break_even_of_the_proposal():
    """Without min_accept, a draft of k tokens must be expected to keep c(k + 1) - 1 + overhead tokens: a
    machine where verification is dearer withholds drafts that a cheap-verification machine makes."""
    from leap.core.drafters import Gated
    from leap.core.runtime.costs import Calibration

    def costs(slope):
        curve = {str(k): 1.0 + slope * (k - 1) for k in range(1, 17)}
        return Calibration({"m": 1}, 0.01, curve, 0.03, 0.1, {"prompt-lookup": 0.02}, 64, {})

    tokens = [1, 2, 3, 1, 2]
    cheap, dear = (Gated("prompt-lookup", prior=0.5, num_tokens=2) for _ in range(2))
    with pytest.raises(RuntimeError, match="use_costs"):
        cheap.propose(tokens, 5)
    cheap.use_costs(costs(0.05))  # 2 tokens: c(3) - 1 + 0.02 = 0.12 < prior 0.5: drafts
    dear.use_costs(costs(0.3))  # c(3) - 1 + 0.02 = 0.62 > 0.5: withheld
    assert cheap.threshold(2) == pytest.approx(0.12) and dear.threshold(2) == pytest.approx(0.62)
    assert cheap.propose(tokens, 5) == [3, 1] and dear.propose(tokens, 5) == []
    assert Gated("prompt-lookup", min_accept=0.3).threshold(9) == 0.3 and not Gated(min_accept=0.3).needs_costs


def test_every_drafters_fingerprint_is_the_same_in_another_process(tiny_llama):
    """The search memory forgets an option whose fingerprint changed, so a fingerprint that differs between processes
    (an object's address in it, a set's order) would forget the whole memory on every run. Every registered drafter,
    with its contract arguments, in this process and a fresh one."""
    import json
    import subprocess
    import sys

    code = ("import json; from leap.core.drafters import drafters; from tests.tiny import tiny_model; "
            "m = tiny_model('llama'); "
            "print(json.dumps({n: drafters.get(n).fingerprint(m, **dict(drafters.get(n).example_kwargs)) "
            "for n in drafters.names()}))")
    here = {n: drafters.get(n).fingerprint(tiny_llama, **dict(drafters.get(n).example_kwargs)) for n in drafters.names()}
    there = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                      timeout=120).stdout)
    assert here == there
    assert len(set(here.values())) == len(here)  # no two drafters alike
    # an object argument (a runner, a head) counts by its type: its address differs in every process
    lowbit = drafters.get("lowbit")
    assert lowbit.fingerprint(tiny_llama, runner=object()) == lowbit.fingerprint(tiny_llama, runner=object())
