"""Online learning of the EAGLE head (issue 19; :mod:`leap.heads.online`): it learns from verification
while it drafts, never changes the output or the model, and stops at its cap."""

from __future__ import annotations

import pytest
import torch

from leap.core import SelfSpecDecoder
from leap.core.errors import SettingsError
from leap.heads.drafter import Eagle
from tests.heads.test_heads import _bigram_model


def _second_half_acceptance(out) -> float:
    steps = out.steps[len(out.steps) // 2:]
    return sum(s.accepted for s in steps) / max(1, sum(s.drafted for s in steps))


def test_online_learning_raises_acceptance_on_a_learnable_target():
    """An untrained head on the toy whose next token is a fixed map of the current one: drafting alone
    stays near its initial agreement; learning from each verification makes the later drafts right."""
    model = _bigram_model()
    prompt = [17, 40]
    plain = SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=120).token_ids
    runs = {}
    for online in (False, True):
        drafter = Eagle(num_tokens=4, head="untrained", online=online, online_max_updates=0)
        out = SelfSpecDecoder(model, None, drafter=drafter).generate(prompt, max_new_tokens=120)
        assert out.token_ids == plain
        runs[online] = _second_half_acceptance(out)
    assert runs[False] < 0.7 and runs[True] > 0.85, runs


def test_online_updates_change_the_head_and_never_the_output_or_the_model(tiny_any):
    prompt = [5, 6, 7, 8, 9, 10, 5, 6, 7]
    plain = SelfSpecDecoder(tiny_any, None).generate(prompt, max_new_tokens=48).token_ids
    model_before = {k: v.clone() for k, v in tiny_any.hf_model.state_dict().items()}
    drafter = Eagle(num_tokens=3, head="untrained", online=True, online_lr=1e-2, online_every=4, online_window=8,
                    online_max_updates=0)
    decoder = SelfSpecDecoder(tiny_any, None, drafter=drafter)
    out = decoder.generate(prompt, max_new_tokens=48)
    head_before = {k: v.clone() for k, v in drafter.head.state_dict().items()}
    again = decoder.generate(prompt, max_new_tokens=48)  # the head keeps learning across prompts
    assert out.token_ids == plain and again.token_ids == plain
    assert drafter.learner.updates >= 5
    assert any(not torch.equal(v, drafter.head.state_dict()[k]) for k, v in head_before.items())
    after = tiny_any.hf_model.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in model_before.items())


def test_online_learning_stops_at_its_cap_per_prompt(tiny_llama):
    drafter = Eagle(num_tokens=2, head="untrained", online=True, online_every=2, online_max_updates=3)
    decoder = SelfSpecDecoder(tiny_llama, None, drafter=drafter)
    for prompt in ([5, 6, 7, 8], [9, 10, 11, 12]):
        decoder.generate(prompt, max_new_tokens=40)
        assert drafter.learner.updates == 3  # each prompt may spend up to the cap again


@pytest.mark.parametrize("bad", [dict(online_lr=0.0), dict(online_every=0), dict(online_window=1),
                                 dict(online_max_updates=-1)])
def test_bad_online_settings_are_refused_when_the_drafter_is_made(bad):
    with pytest.raises(SettingsError, match="online learning"):
        Eagle(head="untrained", online=True, **bad)
