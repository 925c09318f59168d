"""llama.cpp contexts kept for reuse within a process: a dropped low-bit runner's context serves the next one.

A llama.cpp context holds the draft's KV cache, allocated and cleared when the context is made: for the default model
at its n_ctx of 8192, ~190 MB and ~80 ms on this project's CPU (``python experiments/2026-11-26-lowbit-contexts/lowbit_contexts.py``). Every
``leap generate`` call made it anew for its ``lowbit`` runner, and the drafter search twice (``lowbit`` and
``cascade`` each hold a runner), inside the call's clock - a cost of the process's history, not of the request.
The weights are already loaded once per process (``leap.core.modeling.low_bit._MODELS``); this does the same for
contexts: :meth:`LlamaCppRunner.__del__ <leap.core.modeling.low_bit.LlamaCppRunner>` hands its context back with
:func:`give` and the next runner made with the same settings takes it with :func:`take`.

A context taken here starts empty: :func:`take` clears its memory (every sequence's cells), so no runner ever reads
another's tokens - a reused cache would hand a bench method a free prefill of the prompt another method took in.
At most :data:`KEEP` contexts wait per setting; more are freed. ``LEAP_LOWBIT_REUSE=0`` turns reuse off (each runner
makes and frees its own, as before): the ablation.

Who calls what: :class:`~leap.core.modeling.low_bit.LlamaCppRunner` alone.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["KEEP", "give", "take", "waiting"]

#: contexts kept per setting (a search holds two runners, lowbit's and cascade's; more wait only briefly)
KEEP = 2

#: (GGUF path, n_ctx, sequences, micro-batch, threads) -> [(context, batch)] handed back, not yet taken
_FREE: dict[tuple, list[tuple[Any, Any]]] = {}


def _on() -> bool:
    return os.environ.get("LEAP_LOWBIT_REUSE", "1") != "0"


def take(lib: Any, key: tuple) -> tuple[Any, Any] | None:
    """A context (and its batch) made earlier with ``key``'s settings, emptied; None when none waits."""
    free = _FREE.get(key)
    if not _on() or not free:
        return None
    ctx, batch = free.pop()
    lib.llama_memory_clear(lib.llama_get_memory(ctx), False)  # every sequence's cells freed (their data unread)
    return ctx, batch


def give(lib: Any, key: tuple, ctx: Any, batch: Any) -> None:
    """Hand back a context a runner no longer uses: kept for the next runner with ``key``'s settings, or freed."""
    free = _FREE.setdefault(key, [])
    if _on() and len(free) < KEEP:
        free.append((ctx, batch))
        return
    lib.llama_batch_free(batch)
    lib.llama_free(ctx)  # the model stays loaded for the process


def waiting(key: tuple | None = None) -> int:
    """How many contexts wait (with ``key``'s settings, or in all)."""
    return len(_FREE.get(key, ())) if key is not None else sum(len(v) for v in _FREE.values())
