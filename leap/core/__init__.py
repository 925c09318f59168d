"""leap.core: configurations, the model adapter and the lossless self-speculative decoder.

Names are imported lazily (PEP 562), so ``from leap.core.config import LayerConfig`` and the pure
search/zone logic that uses it never import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LayerAction": "leap.core.config",
    "LayerConfig": "leap.core.config",
    "SelfSpecDecoder": "leap.core.decoder",
    "DecodingSession": "leap.core.decoder",
    "LeapModel": "leap.core.model",
    "load_model": "leap.core.model",
    "wrap_model": "leap.core.model",
    "resolve_model": "leap.core.model",
    "DEFAULT_MODEL": "leap.core.model",
    "GenerationOutcome": "leap.core.outcome",
    "StepRecord": "leap.core.outcome",
    "DraftPolicy": "leap.core.policies",
    "draft_policies": "leap.core.policies",
    "make_policy": "leap.core.policies",
    "Registry": "leap.core.registry",
    "SamplingSettings": "leap.core.sampling",
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
