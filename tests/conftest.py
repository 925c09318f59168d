"""Shared fixtures: tiny random Llama and Qwen2 models built in memory (milliseconds per forward)."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

from tests.tiny import tiny_model

settings.register_profile(
    "leap",
    deadline=None,
    max_examples=int(os.environ.get("LEAP_HYPOTHESIS_EXAMPLES", "30")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
)
settings.load_profile("leap")

# one torch thread per pytest-xdist worker (the workers share the cores; tiny-model ops gain nothing from
# threads), else up to two; LEAP_TEST_THREADS overrides
_default_threads = 1 if os.environ.get("PYTEST_XDIST_WORKER") else min(2, torch.get_num_threads())
torch.set_num_threads(int(os.environ.get("LEAP_TEST_THREADS", _default_threads)))


@pytest.fixture(scope="session")
def tiny_llama():
    """6-layer random Llama, vocab 97, EOS = 3 (so EOS stops are exercised)."""
    return tiny_model("llama", eos_token_id=3)


@pytest.fixture(scope="session")
def tiny_qwen2():
    """6-layer random Qwen2 (biased q/k/v projections), no EOS."""
    return tiny_model("qwen2", eos_token_id=None)


@pytest.fixture(scope="session")
def tiny_mistral():
    """6-layer random Mistral with an 8-token sliding window on every layer (windowed attention in every
    property test that takes ``tiny_any``: prompts and drafts run past the window)."""
    return tiny_model("mistral", eos_token_id=None)


@pytest.fixture(scope="session", params=["llama", "qwen2", "mistral"])
def tiny_any(request, tiny_llama, tiny_qwen2, tiny_mistral):
    return {"llama": tiny_llama, "qwen2": tiny_qwen2, "mistral": tiny_mistral}[request.param]
