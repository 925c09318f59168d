"""leap: a workbench for self-speculative decoding research.

A model drafts tokens with a subset of its own layers (some executed, some skipped, some repeated),
verifies them with all its layers in one forward pass and keeps the longest correct prefix. Output is
exactly what plain decoding gives; only speed changes. See README.md.

Top-level names are imported lazily, so importing ``leap`` is cheap and torch-free until a model or
decoder is used.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_CORE = ("LayerAction", "LayerConfig", "LeapModel", "SelfSpecDecoder", "DecodingSession",
         "GenerationOutcome", "load_model")

_API = ("generate", "generate_with_search")  # leap.api: two calls from Python

__all__ = [*_CORE, *_API, "__version__"]

try:  # register the Gymnasium environments (cheap: entry points are imported by gym.make)
    from leap.envs import register_envs as _register_envs

    _register_envs()
except ImportError:  # pragma: no cover - gymnasium missing
    pass


def __getattr__(name: str) -> Any:
    if name in _CORE:
        import leap.core

        return getattr(leap.core, name)
    if name in _API:
        import leap.api

        return getattr(leap.api, name)
    raise AttributeError(f"module 'leap' has no attribute {name!r}")
