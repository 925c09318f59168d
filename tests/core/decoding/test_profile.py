"""The time profile of a generation (leap.core.decoding.profile)."""

from __future__ import annotations

import pytest

from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.decoding.profile import format_profile, time_profile


def test_the_profile_adds_up_and_says_per_token_costs_in_plain_steps(tiny_llama):
    outcome = SelfSpecDecoder(tiny_llama, None, drafter="prompt-lookup").generate(
        [5, 9, 14, 20, 7, 11, 5, 9, 14, 20, 7, 11, 5, 9], max_new_tokens=24)
    p = time_profile(outcome, plain_step_s=0.01, call_s=outcome.wall_time_s + 0.5)
    assert p["prefill_s"] + p["draft_s"] + p["verify_s"] + p["other_s"] == pytest.approx(p["wall_s"])
    assert p["other_s"] >= 0.5  # the call's time outside the outcome lands in "other"
    assert p["draft_s"] == pytest.approx(sum(s.draft_time_s for s in outcome.steps))
    assert p["steps"] == len(outcome.steps) and p["draft_tokens"] == sum(s.drafted for s in outcome.steps) > 0
    assert p["draft_per_token_s"] == pytest.approx(p["draft_s"] / p["draft_tokens"])
    assert p["draft_token_in_plain_steps"] == pytest.approx(p["draft_per_token_s"] / 0.01)
    assert p["verify_in_plain_steps"] == pytest.approx(p["verify_s"] / p["steps"] / 0.01)
    assert p["model_forward_s"] + p["outside_forward_s"] == pytest.approx(p["draft_s"] + p["verify_s"])
    text = format_profile(p)
    assert "plain steps" in text and "prefill" in text and "draft tokens" in text


def test_without_a_plain_step_no_ratio_is_made_up(tiny_llama):
    outcome = SelfSpecDecoder(tiny_llama, None).generate([5, 6, 7, 8], max_new_tokens=6)
    p = time_profile(outcome)
    assert p["draft_token_in_plain_steps"] is None and p["verify_in_plain_steps"] is None
    assert p["draft_per_token_s"] is None and p["draft_tokens"] == 0  # plain decoding drafts nothing
