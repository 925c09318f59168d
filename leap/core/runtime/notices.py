"""Messages a user must hear once, not on every request: a fallback to something slower, a memory dropped or
forgotten. Never silent, never repeated.

Who calls what: :mod:`leap.core.modeling.low_bit` (runner fallbacks) and :mod:`leap.search.memory` (memory versions),
each with a set of its own (tests reset a module's set to hear a message again).
"""

from __future__ import annotations

import sys

__all__ = ["say_once"]


def say_once(text: str, said: set[str]) -> None:
    """Print ``text`` on stderr unless it is already in ``said`` (then add it)."""
    if text not in said:
        said.add(text)
        print(text, file=sys.stderr, flush=True)
