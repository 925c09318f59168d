"""leap's two calls from Python (leap.api): the same outcomes as the decoder and the search runner they wrap."""

from __future__ import annotations

import leap
from leap.core import LayerConfig, SelfSpecDecoder

PROMPT = [5, 6, 7, 5, 6, 7, 8, 5, 6]


def test_generate_is_the_decoder_with_a_drafter_or_a_configuration(tiny_llama):
    plain = SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=16).token_ids
    out = leap.generate(tiny_llama, PROMPT, drafter="prompt-lookup", max_new_tokens=16, chat=False)
    assert out.token_ids == plain and out.steps[0].drafter == "prompt-lookup"
    layered = leap.generate(tiny_llama, PROMPT, config="ESSEEE", max_new_tokens=16, chat=False)
    assert layered.token_ids == plain and layered.config == str(LayerConfig.parse("ESSEEE"))


def test_search_runs_the_online_search_and_returns_its_outcome(tiny_llama, tmp_path, monkeypatch):
    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    plain = SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=16).token_ids
    found = leap.generate_with_search(tiny_llama, PROMPT, max_new_tokens=16, chat=False, budget=3, reward="cost")
    assert found.generation.token_ids == plain and found.iterations >= 1
    assert not (tmp_path / "search_memory").exists() or list((tmp_path / "search_memory").glob("*.json"))
    assert leap.generate_with_search(tiny_llama, PROMPT, drafters=None, memory=False, max_new_tokens=8, chat=False,
                       budget=2, reward="cost").generation.token_ids == plain[:8]
