"""Errors that leap raises on bad input.

Every error names the problem and the fix, so that a researcher who mistypes a flag reads what to do
instead of a stack trace from deep inside torch. All derive from :class:`LeapError` (a ``ValueError``),
so callers that already catch ``ValueError`` keep working.
"""

from __future__ import annotations

__all__ = [
    "LeapError",
    "ConfigError",
    "ModelNotFoundError",
    "ContextLengthError",
    "SettingsError",
    "UnknownNameError",
]


class LeapError(ValueError):
    """Base class of leap's input errors."""


class ConfigError(LeapError):
    """A :class:`~leap.core.config.LayerConfig` is malformed (wrong length, unknown action, ...)."""


class ModelNotFoundError(LeapError, FileNotFoundError):
    """A model name or path cannot be resolved to weights on this machine."""


class ContextLengthError(LeapError):
    """The prompt plus the requested new tokens do not fit the model's context window."""


class SettingsError(LeapError):
    """A generation setting is out of range (temperature, top-p, max_new_tokens, ...)."""


class UnknownNameError(LeapError, KeyError):
    """A registry lookup missed; the message lists the registered names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""
