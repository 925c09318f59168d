"""A static check for implicit device-to-host transfers in leap's source.

On a GPU, ``tensor.numpy()`` raises, and ``np.asarray(tensor)``, ``float(tensor)`` or ``int(tensor)``
silently copy to the host (a synchronisation). leap's rule (:mod:`leap.core.runtime.device`) is that every
transfer is explicit: ``.cpu()`` / :func:`~leap.core.runtime.device.to_host` / :func:`~leap.core.runtime.device.to_numpy`
before NumPy, ``.item()`` / ``.tolist()`` for Python values. This module finds the places that break the
rule without running anything, so the check holds on a CPU-only CI:

* ``X.numpy()`` where ``X`` is not ``Y.cpu()``, ``Y.to("cpu")`` or ``to_host(Y)`` (also through
  ``.detach()``, ``.float()``, ``.double()``, ``.contiguous()``, ``.clone()`` after the transfer);
* ``np.array(E)`` / ``np.asarray(E)`` and ``float(E)`` / ``int(E)`` / ``bool(E)`` whose argument is built
  by a ``torch.`` call or a tensor method that returns a tensor (``.norm()``, ``.sum()``, ``.mean()``,
  ``.argmax()``, ...), i.e. a tensor that may live on the device.

A line may opt out with a trailing ``# host: <why>`` comment (for a tensor known to be on the host).

Who calls what: ``tests/core/runtime/test_host_transfers.py`` runs :func:`find_implicit_transfers` over every
module of ``leap/`` and over a planted example that must be flagged.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Finding", "find_implicit_transfers", "check_tree"]

_HOST_CALLS = {"cpu", "to_host", "to_numpy", "item", "tolist"}
_NOT_TENSORS = {"backends", "cuda", "_C", "version", "get_num_threads", "is_tensor"}  # torch.X that are not tensors
_PASS_THROUGH = {"detach", "float", "double", "contiguous", "clone", "view", "reshape", "flatten", "squeeze"}
_TENSOR_METHODS = {
    "norm", "sum", "mean", "max", "min", "argmax", "argmin", "prod", "std", "var", "abs", "exp", "log",
    "softmax", "logsumexp", "cumsum", "cumprod", "matmul", "dot", "float", "double", "half", "to",
    "clamp", "clamp_min", "clamp_max", "gather", "index_select", "masked_fill", "topk", "sort", "diff",
}
_CASTS = {"float", "int", "bool"}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}: {self.code}"


def _is_host_transfer(node: ast.AST) -> bool:
    """Whether ``node`` is a value already moved to the host explicitly."""
    while isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in _HOST_CALLS:
            return True
        if not isinstance(func, ast.Attribute):
            return False
        if func.attr in _HOST_CALLS:
            return True
        if func.attr == "to" and any(isinstance(a, ast.Constant) and a.value == "cpu" for a in node.args):
            return True
        if func.attr == "to" and any(k.arg == "device" and isinstance(k.value, ast.Constant)
                                     and k.value.value == "cpu" for k in node.keywords):
            return True
        if func.attr not in _PASS_THROUGH:
            return False
        node = func.value
    return False


def _builds_tensor(node: ast.AST) -> bool:
    """Whether ``node`` is evidently a tensor expression (a ``torch.`` call or a tensor method)."""
    if _is_host_transfer(node):
        return False
    for sub in ast.walk(node):
        if isinstance(sub, (ast.ListComp, ast.GeneratorExp, ast.List, ast.Tuple)) and sub is node:
            return False
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            root = sub.func
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in {"np", "numpy", "math"}:
                continue
            if isinstance(root, ast.Name) and root.id == "torch":
                first = sub.func
                while isinstance(first.value, ast.Attribute):
                    first = first.value
                if first.attr not in _NOT_TENSORS:
                    return True
            elif sub is node and sub.func.attr in _TENSOR_METHODS:
                return True
    return False


def _is_numpy_ctor(func: ast.AST) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr in {"array", "asarray"}
            and isinstance(func.value, ast.Name) and func.value.id in {"np", "numpy"})


def find_implicit_transfers(source: str, path: str = "<string>") -> list[Finding]:
    """Every implicit device-to-host transfer in ``source`` (see the module docstring)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    found: list[Finding] = []

    def add(node: ast.AST, why: str) -> None:
        text = lines[node.lineno - 1] if node.lineno - 1 < len(lines) else ""
        if "# host:" in text:
            return
        found.append(Finding(path, node.lineno, text.strip(), why))

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "numpy" and not node.args:
            if not _is_host_transfer(func.value):
                add(node, ".numpy() without an explicit .cpu() / to_host() (raises on a GPU)")
        elif _is_numpy_ctor(func) and node.args and _builds_tensor(node.args[0]):
            add(node, "NumPy array of a tensor without an explicit transfer (use to_numpy)")
        elif isinstance(func, ast.Name) and func.id in _CASTS and len(node.args) == 1 \
                and _builds_tensor(node.args[0]):
            add(node, f"{func.id}() of a tensor: an implicit transfer (use .item() at a step boundary)")
    return found


def check_tree(root: str | Path) -> list[Finding]:
    """:func:`find_implicit_transfers` over every ``.py`` file below ``root``."""
    root = Path(root)
    out: list[Finding] = []
    for file in sorted(root.rglob("*.py")):
        out.extend(find_implicit_transfers(file.read_text(), str(file.relative_to(root.parent))))
    return out
