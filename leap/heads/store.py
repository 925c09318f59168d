"""Where draft heads live: ``$LEAP_CACHE/heads/<model>/head.safetensors``, or shipped in the package.

:func:`default_head_path` is what ``eagle`` loads when no ``head=PATH`` is given: the head ``leap
train-head`` last wrote for this model under ``$LEAP_CACHE`` (default ``~/.cache/leap``), else the head
shipped in ``leap/data/heads/`` when its record names this model. Shipped heads are listed in
``leap/data/heads/README.md`` with the command, commit and data that made them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from leap.core.errors import SettingsError

__all__ = ["default_head_path", "default_exit_head_path", "exit_head_name", "cache_dir", "shipped_heads",
           "file_sha256"]

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


def file_stamp(path: str | Path | None) -> str:
    """A short content hash of a head's file ("none": no file), for a drafter's
    :meth:`~leap.core.drafters.base.Drafter.fingerprint`: the same file reinstalled keeps its stamp, a head trained
    again gets another. Hashed once per file version (path, size, modification time) in a process."""
    if path is None or not Path(path).is_file():
        return "none"
    st = Path(path).stat()
    return _stamp(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _stamp(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(path)[:12]


def default_head_path(model: Any) -> Path:
    """The head ``eagle`` uses for ``model`` by default (module docstring); a clear error if none exists."""
    from leap.heads.head import head_record

    trained = cache_dir(model) / "head.safetensors"
    if trained.is_file():
        return trained
    for path in shipped_heads():
        record = head_record(path)
        if record.get("model") == model.name and record.get("kind", "eagle") == "eagle":
            return path
    raise SettingsError(f"no draft head for {model.name}: train one with `leap train-head --model {model.name}` "
                        f"(it is written to {trained}), or pass --drafter-arg head=PATH")


def exit_head_name(layer: int) -> str:
    """The file name ``leap train-head --layer k`` writes under the model's cache folder."""
    return f"exit-{int(layer)}.safetensors"


def default_exit_head_path(model: Any, layer: int) -> Path:
    """The exit head on ``layer`` that ``exit-head`` uses for ``model`` by default: ``leap train-head --layer``'s
    under ``$LEAP_CACHE``, else a shipped one made for this model and layer; a clear error if none exists."""
    from leap.heads.head import head_record

    trained = cache_dir(model) / exit_head_name(layer)
    if trained.is_file():
        return trained
    for path in shipped_heads():
        record = head_record(path)
        if record.get("model") == model.name and record.get("kind") == "exit" and record.get("layer") == int(layer):
            return path
    raise SettingsError(f"no exit head on layer {layer} for {model.name}: train one with `leap train-head --model "
                        f"{model.name} --layer {layer}` (it is written to {trained}), or pass head=PATH")
