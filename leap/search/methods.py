"""The earlier name of :mod:`leap.search.factory` (kept for users' imports; ``leap.bench.methods`` is the
benchmark's method registry, a different thing)."""

from leap.search.factory import agent_factory

__all__ = ["agent_factory"]
