"""leap.core: configurations, the model adapter and the lossless self-speculative decoder."""

from leap.core.config import LayerAction, LayerConfig
from leap.core.decoder import DecodingSession, SelfSpecDecoder
from leap.core.errors import (
    ConfigError,
    ContextLengthError,
    LeapError,
    ModelNotFoundError,
    SettingsError,
    UnknownNameError,
)
from leap.core.model import DEFAULT_MODEL, LeapModel, load_model, resolve_model, wrap_model
from leap.core.outcome import GenerationOutcome, StepRecord
from leap.core.policies import DraftPolicy, draft_policies, make_policy
from leap.core.registry import Registry
from leap.core.sampling import SamplingSettings

__all__ = [
    "LayerAction",
    "LayerConfig",
    "SelfSpecDecoder",
    "DecodingSession",
    "LeapModel",
    "load_model",
    "resolve_model",
    "wrap_model",
    "DEFAULT_MODEL",
    "GenerationOutcome",
    "StepRecord",
    "DraftPolicy",
    "draft_policies",
    "make_policy",
    "Registry",
    "SamplingSettings",
    "LeapError",
    "ConfigError",
    "ContextLengthError",
    "ModelNotFoundError",
    "SettingsError",
    "UnknownNameError",
]
