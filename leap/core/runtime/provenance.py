"""Where a result came from: the git commit, versions, device, dtype, threads and date.

Every benchmark run writes :func:`provenance` into its meta record, and ``leap report`` refuses to
pool records from different commits unless told ``--mixed`` (:func:`check_single_commit`): a table
must be reproducible from one state of the code.

Who calls what: :class:`leap.bench.harness.Bench` (meta record), ``leap report`` (the check), the
``benchmarks/`` scripts (their own meta lines).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from leap.core.errors import LeapError

__all__ = ["provenance", "git_commit", "check_single_commit", "processor_name"]


def git_commit(path: str | Path | None = None) -> str:
    """The commit of the checkout holding ``path`` (default: leap's own source), with ``+dirty`` when
    tracked files differ from it; ``unknown`` outside a git checkout (an installed wheel)."""
    folder = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=folder,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def processor_name(device: Any = None) -> str:
    """The chip a device is: the GPU's name for CUDA devices, else the CPU model (``/proc/cpuinfo``'s
    "model name", or :func:`platform.processor`)."""
    import platform

    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(dev)
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


#: plug-in modules imported by ``--import`` in this process: ``{"module", "file", "sha256"}`` each
#: (:func:`record_plugin`), so a record names the code of the agent/metric/drafter that made it
PLUGINS: list[dict[str, str]] = []


def record_plugin(module: Any) -> None:
    """Remember an imported plug-in module (its name, file and the sha256 of its source) for provenance."""
    import hashlib

    path = getattr(module, "__file__", None)
    digest = ""
    if path:
        try:
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()[:16]
        except OSError:
            pass
    entry = {"module": module.__name__, "file": str(path or ""), "sha256": digest}
    if entry not in PLUGINS:
        PLUGINS.append(entry)


def provenance(model: Any = None) -> dict[str, Any]:
    """The commit, versions, device, dtype, threads and UTC date of a run on ``model``."""
    from importlib.metadata import PackageNotFoundError, version

    def ver(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "unknown"

    info = {"commit": git_commit(), "leap": ver("leap"), "torch": torch.__version__,
            "transformers": ver("transformers"), "threads": torch.get_num_threads(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if PLUGINS:
        info["plugins"] = list(PLUGINS)  # the --import modules that registered what the run used, and their source
    if model is not None:
        info["device"] = str(model.device)
        info["dtype"] = str(model.dtype).replace("torch.", "")
        if model.device.type == "cuda":
            info["device_name"] = torch.cuda.get_device_name(model.device)
    return info


def check_single_commit(records: Sequence[dict[str, Any]], mixed: bool = False) -> list[str]:
    """The commits the meta records name; a :class:`LeapError` when there are several and not ``mixed``."""
    commits = list(dict.fromkeys(r.get("provenance", {}).get("commit", "unrecorded")
                                 for r in records if r.get("kind") == "meta"))
    if len(commits) > 1 and not mixed:
        raise LeapError(f"these records come from {len(commits)} commits ({', '.join(commits)}); a table pools "
                        "one state of the code - rerun the methods into a fresh folder, or pass --mixed to pool "
                        "them anyway")
    return commits
