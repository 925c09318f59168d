"""Model-free drafters: the prompt-lookup rule, and losslessness for every registered drafter."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leap.core import SelfSpecDecoder
from leap.core.drafters import PromptLookup, drafters, make_drafter
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


@pytest.mark.parametrize("name", drafters.names())
@given(prompt=repetitive_prompts, n=st.integers(1, 24))
def test_every_drafter_is_lossless_under_greedy_decoding(tiny_any, name, prompt, n):
    plain = SelfSpecDecoder(tiny_any, None).generate(prompt, max_new_tokens=n)
    out = SelfSpecDecoder(tiny_any, None, drafter=name).generate(prompt, max_new_tokens=n)
    assert out.token_ids == plain.token_ids
    assert sum(out.accepted_lengths) == out.new_tokens
    assert out.layers_per_draft_token == 0.0  # model-free: no layer evaluations while drafting


def test_prompt_lookup_drafts_and_gets_accepted_on_repetitive_text(tiny_llama):
    prompt = [5, 6, 7, 8] * 4
    out = SelfSpecDecoder(tiny_llama, None, drafter="prompt-lookup").generate(prompt, max_new_tokens=30)
    assert out.draft_tokens_proposed > 0 and out.config == "drafter:prompt-lookup"


def test_unknown_drafter_lists_the_registered_ones(tiny_llama):
    from leap.core.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="registered: prompt-lookup"):
        make_drafter("nope")
