"""Where draft heads live: ``$LEAP_CACHE/heads/<model>/head.safetensors``, or shipped in the package.

:func:`default_head_path` is what ``eagle`` loads when no ``head=PATH`` is given: the head ``leap
train-head`` last wrote for this model under ``$LEAP_CACHE`` (default ``~/.cache/leap``), else the head
shipped in ``leap/data/heads/`` when its record names this model. Shipped heads are listed in
``leap/data/heads/README.md`` with the command, commit and data that made them.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from leap.core.errors import SettingsError

__all__ = ["default_head_path", "cache_dir", "shipped_heads", "file_sha256"]

SHIPPED = Path(__file__).resolve().parent.parent / "data" / "heads"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def cache_dir(model: Any) -> Path:
    """``$LEAP_CACHE/heads/<model name>/``: heads and training data for ``model``."""
    root = Path(os.environ.get("LEAP_CACHE", Path.home() / ".cache" / "leap"))
    return root / "heads" / _slug(model.name)


def shipped_heads() -> list[Path]:
    return sorted(SHIPPED.glob("*.safetensors")) if SHIPPED.is_dir() else []


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def default_head_path(model: Any) -> Path:
    """The head ``eagle`` uses for ``model`` by default (module docstring); a clear error if none exists."""
    from leap.heads.head import head_record

    trained = cache_dir(model) / "head.safetensors"
    if trained.is_file():
        return trained
    for path in shipped_heads():
        if head_record(path).get("model") == model.name:
            return path
    raise SettingsError(f"no draft head for {model.name}: train one with `leap train-head --model {model.name}` "
                        f"(it is written to {trained}), or pass --drafter-arg head=PATH")
