"""Counting, at run time, every way a tensor's value reaches Python (a host read).

On a GPU each such read is a synchronisation: the host waits for the device's queue to drain. The
static check (:mod:`leap.core.runtime.host_transfers`) finds some patterns in the source; this module
counts what actually happens while code runs, on any device, the CPU included (a CPU tensor's read
costs nothing there, but the same line is a sync on a GPU, so the count is the device's count).

:class:`HostReads` is a :class:`torch.overrides.TorchFunctionMode`: while it is active every tensor
method call passes through it, and these are counted as reads, by kind:

* ``item``, ``tolist``, ``numpy``, ``__array__`` (``np.asarray(t)``), ``__float__``, ``__int__``,
  ``__bool__`` (``if t:``, ``bool(t)``), ``__index__`` (``xs[t]``, ``range(t)``), ``__repr__`` and ``__str__``
  (``str(t)``, ``print(t)``), ``__format__`` (``f"{t:.3f}"``), ``__contains__`` (``x in t``);
* ops whose output's shape, or Python result, depends on the values (a synchronisation on CUDA): ``nonzero``,
  ``argwhere``, ``masked_select``, ``unique``, ``unique_consecutive``, ``equal``, ``allclose``, ``is_nonzero``,
  ``bincount``, ``one_hot`` without ``num_classes``, one-argument ``where``, ``repeat_interleave`` with a tensor
  of repeats or one argument (the repeats themselves), and boolean-mask indexing (``x[mask]``, counted as
  ``mask-index``);
* ``cpu`` and ``to("cpu")`` (an explicit copy to the host; :func:`~leap.core.runtime.device.to_host`).

``bytes`` adds up what those reads carried (a scalar read: one element; the others: the whole tensor), so a
test can also hold a path to reading only what it needs (Traversal Verification: the few target values
its walk uses, not the ``[rows, V]`` table).

A read of a tensor that an explicit ``.cpu()``/``.to("cpu")``/:func:`~leap.core.runtime.device.to_host`
produced *inside the counted region*, or computed from one, is not counted again (the copy already was),
so ``x.cpu().tolist()`` is one read; so are tensors declared host-resident with :func:`on_host` (the
low-bit runners' logits, made on the CPU whatever the target's device). Tensors made on the host on purpose (``torch.tensor(list_of_ints)``) and read back are
counted like any other: keep such round trips out of per-step paths.

Who calls what: tests declare per-path budgets (``tests/core/runtime/test_host_reads.py``: greedy
chains, trees, sampling, Traversal Verification, every registered drafter and redundancy metric) and
run the paths under :class:`HostReads`; anyone can do the same for a path of their own::

    with HostReads() as reads:
        session.step()
    print(reads.total, reads.by_kind)
"""

from __future__ import annotations

from collections import Counter

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["HostReads", "READ_KINDS", "on_host"]

READ_KINDS = frozenset({"item", "tolist", "numpy", "__array__", "__float__", "__int__", "__bool__", "__index__",
                        "__repr__", "__str__", "__format__", "__contains__",
                        "nonzero"})  # nonzero: its output's shape depends on the values (a sync on CUDA)
#: ops whose result is a Python value or whose output shape depends on the tensor's values: the host must see the
#: values (on CUDA: a synchronisation), so each call is one read, recorded under the op's name (boolean-mask
#: indexing as "mask-index", one-argument ``where`` as "where", ``repeat_interleave`` with tensor repeats)
_DATA_DEPENDENT = frozenset({"equal", "allclose", "masked_select", "unique", "unique_consecutive", "argwhere",
                             "is_nonzero", "bincount"})  # bincount: max(minlength, the largest value + 1) bins
_COPIES = frozenset({"cpu", "to"})


def _is_mask(index) -> bool:
    if isinstance(index, torch.Tensor):
        return index.dtype == torch.bool
    return isinstance(index, tuple) and any(_is_mask(i) for i in index)


def _data_dependent(name: str, args, kwargs) -> str | None:
    """The read kind of a call whose output shape (or Python result) depends on tensor values, else None."""
    if name in _DATA_DEPENDENT:
        return name
    if name == "where" and len(args) + len(kwargs) == 1:
        return "where"
    if name == "repeat_interleave":
        if len(args) == 1 and "repeats" not in kwargs:  # torch.repeat_interleave(repeats): the counts are the values
            return "repeat_interleave"
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        if isinstance(repeats, torch.Tensor) and repeats.numel() > 1:
            return "repeat_interleave"
    if name == "one_hot":  # without num_classes, the largest value sets the width
        classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
        if classes is None or int(classes) < 0:
            return "one_hot"
    if name == "__getitem__" and len(args) > 1 and _is_mask(args[1]):
        return "mask-index"
    return None
_SCALAR_READS = frozenset({"item", "__float__", "__int__", "__bool__", "__index__"})


def _to_host(name: str, args, kwargs) -> bool:
    """Whether a ``cpu``/``to`` call is an explicit copy to the host: ``.cpu()``, or ``.to("cpu")`` with the
    target spelled as a string (``.to(model.device)`` is a placement, not a read, even when that device is
    the CPU of the machine running the count)."""
    if name == "cpu":
        return True
    target = kwargs.get("device") if kwargs else None
    for a in args[1:]:
        if isinstance(a, str):
            target = a
    return isinstance(target, str) and torch.device(target).type == "cpu"


_ACTIVE: list["HostReads"] = []


def on_host(tensor: torch.Tensor) -> torch.Tensor:
    """Declare ``tensor`` a host tensor by construction (e.g. logits a CPU-side draft runner made from a
    NumPy buffer): reading it is not a device synchronisation, so active counters do not count it."""
    for counter in _ACTIVE:
        counter._host[id(tensor)] = tensor
    return tensor


class HostReads(TorchFunctionMode):
    """A context manager counting host reads of tensor values (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_kind: Counter[str] = Counter()
        self.bytes = 0  # the size of what was read: a whole tensor for tolist/numpy/copies, one element for item
        self.where: Counter[str] = Counter()  # "file:line" of the leap frame that read, for reports
        self._host: dict[int, torch.Tensor] = {}  # id -> the host copies made in the region (kept alive)

    def __enter__(self):
        _ACTIVE.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        _ACTIVE.remove(self)
        return super().__exit__(*exc)

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    def _count(self, kind: str, tensor: torch.Tensor | None = None) -> None:
        self.by_kind[kind] += 1
        if tensor is not None:
            self.bytes += tensor.element_size() * (1 if kind in _SCALAR_READS else tensor.numel())
        import sys

        frame = sys._getframe(2)
        while frame is not None and "/leap/" not in frame.f_code.co_filename.replace("\\", "/"):
            frame = frame.f_back
        if frame is not None:
            path = frame.f_code.co_filename.replace("\\", "/")
            self.where[f"{path[path.rfind('/leap/') + 1:]}:{frame.f_lineno}"] += 1

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        result = func(*args, **kwargs)
        host_input = any(isinstance(a, torch.Tensor) and id(a) in self._host for a in args)
        source = args[0] if args and isinstance(args[0], torch.Tensor) else None
        dependent = None if name in READ_KINDS else _data_dependent(name, args, kwargs)
        if name in READ_KINDS or dependent:
            if not host_input:
                self._count(dependent or name, source)
        elif name in _COPIES and source is not None and _to_host(name, args, kwargs):
            if not host_input:
                self._count(name, source)
            host_input = True
        if host_input:  # what a host tensor computes stays on the host
            for out in (result if isinstance(result, (tuple, list)) else (result,)):
                if isinstance(out, torch.Tensor):
                    self._host[id(out)] = out
        return result

    def report(self) -> str:
        """The reads by kind and by source line, most frequent first."""
        kinds = ", ".join(f"{k} {n}" for k, n in self.by_kind.most_common())
        lines = "; ".join(f"{w} x{n}" for w, n in self.where.most_common(8))
        return f"{self.total} host reads, {self.bytes} bytes ({kinds}) at {lines}"
