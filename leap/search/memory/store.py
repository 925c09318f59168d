"""Where a search memory lives: its file under ``$LEAP_CACHE/search_memory``, per model, device, dtype and chip, and the
prior leap ships for a model (:class:`~leap.search.memory.SearchMemory`'s module docstring says what both hold).

Who calls what: ``leap generate``, :func:`leap.api.generate_with_search` and ``leap bench`` get their memory from
:func:`memory_for`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from leap.search.memory.means import SearchMemory

__all__ = ["memory_for", "shipped_prior", "PRIOR_DIR"]


#: where the shipped priors live (package data; benchmarks/search_prior.sh writes them)
PRIOR_DIR = Path(__file__).resolve().parents[2] / "data" / "search_memory"


def _dtype_name(model: Any) -> str:
    return str(getattr(model, "dtype", "")).replace("torch.", "")


def shipped_prior(model: Any) -> Path | None:
    """The prior leap ships for ``model`` (by its name), if there is one measured on the same device type and dtype."""
    path = PRIOR_DIR / f"{str(getattr(model, 'name', 'model')).replace('/', '_')}.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    device = str(getattr(model, "device", "cpu")).split(":")[0]
    return path if data.get("device_type") == device and data.get("dtype") == _dtype_name(model) else None


def _chip(model: Any) -> str:
    """A short hash of the processor or GPU the model runs on: a ``$LEAP_CACHE`` shared between machines (a home
    directory on a cluster) never lends one machine's measurements to another, as the calibration's key."""
    import hashlib

    from leap.core.runtime.provenance import processor_name

    return hashlib.sha256(processor_name(getattr(model, "device", "cpu")).encode()).hexdigest()[:8]


def memory_for(model: Any, *, persist: bool = True, prior: bool | None = None, **kwargs: Any) -> SearchMemory:
    """The memory of ``model`` on this device and dtype: under ``$LEAP_CACHE/search_memory`` when ``persist``,
    else in memory only. Still empty, it starts from the shipped prior (:func:`shipped_prior`) when ``prior``
    (default: when ``persist``; a benchmark's ``memory=fresh`` starts empty, ``memory=prior`` from the prior)."""
    prior = persist if prior is None else prior
    if persist:
        root = Path(os.environ.get("LEAP_CACHE", Path.home() / ".cache" / "leap")) / "search_memory"
        name = f"{getattr(model, 'name', 'model')}-{getattr(model, 'device', 'cpu')}-{_dtype_name(model)}-{_chip(model)}"
        memory = SearchMemory(root / f"{name.replace('/', '_')}.json", **kwargs)
    else:
        memory = SearchMemory(None, **kwargs)
    if prior and memory.empty:
        found = shipped_prior(model)
        if found is not None:
            memory.start_from_prior(found)
    return memory
