"""The commit rule one step applies, a request alone or a batch row (step_draft.commit_cut)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leap.core import SelfSpecDecoder
from leap.core.decoding.batch import BatchDecoder
from leap.core.decoding.step_draft import commit_cut


def test_commit_cuts_after_the_first_eos_and_to_the_room_left():
    assert commit_cut([5, 3, 7, 3], {3}, 10) == ([5, 3], "eos")
    assert commit_cut([5, 6, 7], {3}, 2) == ([5, 6], "max_new_tokens")
    assert commit_cut([5, 6, 7], {3}, 3) == ([5, 6, 7], "max_new_tokens")
    assert commit_cut([5, 6], {3}, 3) == ([5, 6], "")


@given(prompt=st.lists(st.integers(4, 12), min_size=1, max_size=10), cap=st.integers(0, 6))
def test_an_output_holds_eos_only_as_its_last_token(tiny_llama, prompt, cap):
    """Alone and in a batch: nothing is committed after EOS (tiny_llama's EOS is 3), and an output that stops on EOS
    ends with it."""
    eos = tiny_llama.eos_token_ids
    outs = [SelfSpecDecoder(tiny_llama, None, drafter="prompt-lookup").generate(prompt, max_new_tokens=40)]
    batch = BatchDecoder(tiny_llama, "prompt-lookup", num_tokens=cap).generate([prompt, [9, 4]], max_new_tokens=40)
    for ids, reason in [(outs[0].token_ids, outs[0].stop_reason), *((r.token_ids, r.stop_reason) for r in batch.rows)]:
        assert not any(t in eos for t in ids[:-1])
        assert (reason == "eos") == (ids[-1] in eos)
