"""leap.core: the lossless self-speculative decoding engine, in the order data flows through it.

=========================  ==============================================================================
foundations (``*.py``)     ``config`` (LayerAction, LayerConfig), ``errors``, ``registry``, ``options``, ``ucb1``
:mod:`.runtime`            the machine: device-safe transfers, step clocks, the cost record, provenance
:mod:`.modeling`           prompt -> model: the model adapter, KV cache, linears, LayerStack, traces, probes
:mod:`.trees`              the draft's shape: chains and trees (OPT-Tree, sampled trees)
:mod:`.verify`             verify: acceptance rules and tree verification rules
:mod:`.drafters`           draft: what proposes candidate tokens (layer skip, model-free, hybrids)
:mod:`.policies`           draft: when to stop drafting
:mod:`.decoding`           -> outcome: the decoder and session that tie them together, and calibration
=========================  ==============================================================================

Each sub-package may import only those above it in this table (``tests/test_layout.py`` checks
there are no import cycles). Names are imported lazily (PEP 562), so ``from leap.core.config import
LayerConfig`` and the pure search/zone logic that uses it never import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LayerAction": "leap.core.config",
    "LayerConfig": "leap.core.config",
    "SelfSpecDecoder": "leap.core.decoding.decoder",
    "DecodingSession": "leap.core.decoding.session",
    "LeapModel": "leap.core.modeling.model",
    "load_model": "leap.core.modeling.model",
    "wrap_model": "leap.core.modeling.model",
    "resolve_model": "leap.core.modeling.model",
    "DEFAULT_MODEL": "leap.core.modeling.model",
    "GenerationOutcome": "leap.core.decoding.outcome",
    "StepRecord": "leap.core.decoding.outcome",
    "DraftPolicy": "leap.core.policies.base",
    "draft_policies": "leap.core.policies.base",
    "make_policy": "leap.core.policies.base",
    "Registry": "leap.core.registry",
    "SamplingSettings": "leap.core.verify.sampling",
    "LeapError": "leap.core.errors",
    "ConfigError": "leap.core.errors",
    "ContextLengthError": "leap.core.errors",
    "ModelNotFoundError": "leap.core.errors",
    "SettingsError": "leap.core.errors",
    "UnknownNameError": "leap.core.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'leap.core' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
