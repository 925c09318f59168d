"""leap: a workbench for self-speculative decoding research.

A model drafts tokens with a subset of its own layers (some executed, some skipped, some repeated),
verifies them with all its layers in one forward pass and keeps the longest correct prefix. Output is
exactly what plain decoding gives; only speed changes. See README.md.
"""

from leap.core import (
    DecodingSession,
    GenerationOutcome,
    LayerAction,
    LayerConfig,
    LeapModel,
    SelfSpecDecoder,
    load_model,
)

__version__ = "0.1.0"

__all__ = [
    "LayerAction",
    "LayerConfig",
    "LeapModel",
    "SelfSpecDecoder",
    "DecodingSession",
    "GenerationOutcome",
    "load_model",
    "__version__",
]
