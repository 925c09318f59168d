"""The contract between leap and the installed transformers (leap.core.modeling.hf_interface).

A new transformers release that changes what leap relies on (the cache interface attention modules call,
the decoder layer's keywords, the attention registry, rotary embeddings) fails here with a message naming
the version and the change - the test `.ci/run` also runs against the newest releases pyproject allows.
"""

from __future__ import annotations

import pytest
import torch

from leap.core.modeling import hf_interface
from leap.core.modeling.kv_cache import LeapKVCache
from leap.core.modeling.layers import check_contract


def test_installed_transformers_meets_leaps_contract():
    problems = check_contract()
    assert not problems, "\n".join(problems)


def test_a_cache_with_transformers_523s_update_signature_is_named(monkeypatch):
    """The 5.24 break, planted: a cache whose update takes (key, value, layer_idx, cache_kwargs) only.
    Under transformers >= 5.24 (update(..., kwargs=...)) the contract names the version and the change."""

    def old_update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        return self.layers[layer_idx].append(key_states, value_states)

    monkeypatch.setattr(LeapKVCache, "update", old_update)
    if hf_interface.cache_keyword(_llama_layer()) != "cache":
        pytest.skip("transformers < 5.24 calls update(key, value, layer_idx, cache_kwargs): the old signature holds")
    problems = check_contract()
    assert problems and hf_interface.transformers_version() in problems[0]
    assert "cache" in problems[0] and "hf_interface.py" in problems[0]


def test_a_layer_called_under_the_wrong_cache_keyword_is_caught(monkeypatch):
    """Planted: a release whose decoder layer takes its cache under a name leap does not know."""
    monkeypatch.setattr(hf_interface, "cache_keyword", lambda layer: "leap_not_the_cache")
    problems = check_contract()
    assert problems and hf_interface.transformers_version() in problems[0], problems


def test_call_layer_passes_the_cache_under_the_layers_own_keyword():
    layer = _llama_layer()
    cache = LeapKVCache(2)
    hidden = torch.randn(1, 3, 32)
    cos_sin = _rotary()(hidden, position_ids=torch.arange(3).view(1, -1))
    out = hf_interface.call_layer(layer, hidden, cache=cache, attention_mask=None,
                                  position_ids=torch.arange(3).view(1, -1), position_embeddings=cos_sin)
    assert out.shape == hidden.shape
    assert cache.layers[1].length == 3  # the attention module wrote leap's cache


def test_output_cache_reads_either_name():
    class New:
        cache = "c"

    class Old:
        past_key_values = "p"

    assert hf_interface.output_cache(New()) == "c"
    assert hf_interface.output_cache(Old()) == "p"


def _config():
    from transformers import LlamaConfig

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    config._attn_implementation = "sdpa"
    return config


def _llama_layer():
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    return LlamaDecoderLayer(_config(), layer_idx=1).eval()


def _rotary():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    return LlamaRotaryEmbedding(_config())
