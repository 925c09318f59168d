"""llama.cpp's saved state of one sequence, parsed and written: the KV handoff (issue 35).

The low-bit self-draft (:class:`~leap.core.modeling.low_bit.LlamaCppRunner`) runs the model's own weights at low
precision, so the keys and values it computes for a prompt are the target's up to quantisation error (measured on
the default model: cosine 0.9997-0.99999 for keys, 0.997-0.9998 for values, layers 0-29). Taking a 700-token
prompt in costs llama.cpp ~2.2 s at Q8_0 on this project's CPU, against ~1.1 s for the float32 prefill the target
has already run (issue 35; ``benchmarks/handoff.py`` measures both). The handoff writes the target's keys and
values of the prompt into the draft's sequence with ``llama_state_seq_set_data`` - a copy, no forward pass -
and the draft goes on from there. Lossless whatever the draft holds: verification decides every token.

The format (llama.cpp ``src/llama-context.cpp`` ``state_seq_get_data`` and ``src/llama-kv-cache.cpp``
``state_write``, as vendored by llama-cpp-python 0.3.36)::

    u32 magic 0xAF143CD8, i32 seq_id, u32 n_stream, then per stream: u32 cell_count and, if > 0,
      per cell: i32 pos, u32 n_seq_id, i32 seq_id * n_seq_id
      u32 v_trans, u32 n_layer
      per layer: i32 k_type, u64 k_row_bytes, cell_count rows of keys
      per layer: (v_trans = 0) i32 v_type, u64 v_row_bytes, cell_count rows of values
                 (v_trans = 1) i32 v_type, u32 v_element_bytes, u32 n_embd_v, n_embd_v columns of cell_count

Models whose cells carry extra data (M-RoPE, per-layer embeddings) write more per cell; :func:`parse` checks that
a blob is consumed exactly, so a format it does not know is an error, never a silent misread (the runner then
takes the prompt in itself). Who calls what: :meth:`~leap.core.modeling.low_bit.LlamaCppRunner.take_kv`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["MAGIC", "SeqState", "SeqStateError", "parse", "encode", "to_rows", "from_rows", "ELEMENT_BYTES"]

MAGIC = 0xAF143CD8
#: ggml types the handoff writes (float caches; llama.cpp's default cache type is F16): type id -> bytes per value
ELEMENT_BYTES = {0: 4, 1: 2, 30: 2}  # GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16
_DTYPES = {0: torch.float32, 1: torch.float16, 30: torch.bfloat16}


class SeqStateError(ValueError):
    """A blob that is not llama.cpp's sequence state as this module knows it."""


@dataclass
class SeqState:
    """One sequence's KV cells: positions, and per layer the key and value rows as raw ggml bytes ``[cells, row]``."""

    seq: int
    n_stream: int
    positions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    v_trans: bool = False
    k_types: list[int] = field(default_factory=list)
    keys: list[np.ndarray] = field(default_factory=list)
    v_types: list[int] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)  # [cells, row] whatever the layout on the wire

    @property
    def cells(self) -> int:
        return int(self.positions.shape[0])


class _Reader:
    def __init__(self, blob: bytes) -> None:
        self.blob, self.at = blob, 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.at + size > len(self.blob):
            raise SeqStateError("the sequence state ends early")
        out = struct.unpack_from(fmt, self.blob, self.at)
        self.at += size
        return out

    def raw(self, n: int) -> np.ndarray:
        if self.at + n > len(self.blob):
            raise SeqStateError("the sequence state ends early")
        out = np.frombuffer(self.blob, np.uint8, n, self.at)
        self.at += n
        return out


def parse(blob: bytes) -> SeqState:
    """The cells of one sequence's state (``llama_state_seq_get_data``); :class:`SeqStateError` on anything else."""
    r = _Reader(bytes(blob))
    magic, seq = r.take("<Ii")
    if magic != MAGIC:
        raise SeqStateError(f"not a llama.cpp sequence state (magic {magic:#x})")
    (n_stream,) = r.take("<I")
    state = SeqState(seq=seq, n_stream=n_stream)
    for _ in range(n_stream):
        (cells,) = r.take("<I")
        if cells == 0:
            continue
        if state.cells:
            raise SeqStateError("one sequence in two streams")
        positions = []
        for _ in range(cells):
            pos, n_seq = r.take("<iI")
            if n_seq != 1:
                raise SeqStateError(f"a cell in {n_seq} sequences")
            r.take("<i")
            positions.append(pos)
        state.positions = np.asarray(positions, np.int32)
        v_trans, n_layer = r.take("<II")
        state.v_trans = bool(v_trans)
        for _ in range(n_layer):
            k_type, row = r.take("<iQ")
            state.k_types.append(k_type)
            state.keys.append(r.raw(cells * row).reshape(cells, row))
        for _ in range(n_layer):
            if not v_trans:
                v_type, row = r.take("<iQ")
                state.values.append(r.raw(cells * row).reshape(cells, row))
            else:
                v_type, element, n_embd = r.take("<iII")
                state.values.append(r.raw(cells * element * n_embd).reshape(n_embd, cells, element)
                                    .transpose(1, 0, 2).reshape(cells, n_embd * element))
            state.v_types.append(v_type)
    if r.at != len(r.blob):
        raise SeqStateError(f"{len(r.blob) - r.at} bytes left over: a cell format this module does not know")
    return state


def encode(state: SeqState) -> bytes:
    """The blob ``llama_state_seq_set_data`` reads back into ``state.seq`` (its cells in the first stream)."""
    out = [struct.pack("<IiI", MAGIC, state.seq, state.n_stream)]
    cells = state.cells
    out.append(struct.pack("<I", cells))
    if cells:
        meta = np.empty((cells, 3), np.int32)
        meta[:, 0], meta[:, 1], meta[:, 2] = state.positions, 1, state.seq
        out.append(meta.tobytes())
        out.append(struct.pack("<II", int(state.v_trans), len(state.keys)))
        for k_type, rows in zip(state.k_types, state.keys):
            out.append(struct.pack("<iQ", k_type, rows.shape[1]))
            out.append(np.ascontiguousarray(rows).tobytes())
        for v_type, rows in zip(state.v_types, state.values):
            if not state.v_trans:
                out.append(struct.pack("<iQ", v_type, rows.shape[1]))
                out.append(np.ascontiguousarray(rows).tobytes())
            else:
                element = ELEMENT_BYTES[v_type]
                n_embd = rows.shape[1] // element
                out.append(struct.pack("<iII", v_type, element, n_embd))
                out.append(np.ascontiguousarray(rows.reshape(cells, n_embd, element).transpose(1, 0, 2)).tobytes())
    out.extend(struct.pack("<I", 0) for _ in range(state.n_stream - 1))
    return b"".join(out)


def to_rows(x: torch.Tensor, ggml_type: int) -> np.ndarray:
    """A float tensor ``[cells, n]`` as raw ggml rows ``[cells, n * bytes]`` of ``ggml_type`` (F32, F16 or BF16)."""
    if ggml_type not in ELEMENT_BYTES:
        raise SeqStateError(f"the draft's cache has ggml type {ggml_type}; the handoff writes F32, F16 or BF16")
    dtype = _DTYPES[ggml_type]
    raw = x.detach().to(dtype).contiguous().view(torch.uint8)
    return raw.cpu().numpy().reshape(x.shape[0], -1)  # (the handoff's caches are on the CPU already)


def from_rows(rows: np.ndarray, ggml_type: int) -> torch.Tensor:
    """Raw ggml rows back to float32 ``[cells, n]`` (the inverse of :func:`to_rows`)."""
    if ggml_type not in ELEMENT_BYTES:
        raise SeqStateError(f"ggml type {ggml_type} is not a float cache type")
    dtype = _DTYPES[ggml_type]
    return torch.from_numpy(np.array(rows, copy=True)).view(dtype).float()
