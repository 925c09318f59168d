"""The KV handoff: the target's keys and values of a prompt written into the low-bit draft's llama.cpp sequence.

Why and the format: :mod:`leap.core.modeling.llama_cpp.seq_state`. What has to agree between the two caches:

* **Rotary layout.** transformers rotates the two halves of each head (``rotate_half``); llama.cpp's "normal" rope
  (``LLAMA_ROPE_TYPE_NORM``, Llama's) rotates adjacent pairs, and ``convert_hf_to_gguf.py`` permutes the ``q``/``k``
  weights so that both give the same attention. A key in llama.cpp's cache is then the transformers key with its
  dimensions interleaved: llama.cpp's ``2i`` is transformers' ``i``, its ``2i + 1`` transformers' ``i + d/2``
  (:func:`rope_permutation`). NEOX rope (Qwen2, ...) keeps transformers' layout. Other rope types: no handoff.
* **Cache types** (F16 by default, F32, BF16), ``v_trans`` and the number of streams: read from llama.cpp itself.

Checked at run time, never assumed: the first handoff of a runner's model (per process and context layout) feeds
the prompt's first :data:`CHECK_TOKENS` tokens through llama.cpp the ordinary way, reads the sequence back and
compares each layer's keys and values with the target's (cosine per head vector, the worst layer's mean at least
:data:`MIN_COSINE`). A GGUF that is not the target's weights, a rotary layout this module gets wrong or a format it
misreads fails that check; the runner then takes prompts in itself, as before, and says so once on stderr.

Who calls what: :meth:`leap.core.modeling.low_bit.LlamaCppRunner.take_kv` calls :func:`hand_off`.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from leap.core.modeling.kv_cache import PromptKV
from leap.core.modeling.llama_cpp.seq_state import SeqState, SeqStateError, encode, from_rows, parse, to_rows
from leap.core.runtime.host_reads import on_host

__all__ = ["CHECK_TOKENS", "MIN_COSINE", "Layout", "hand_off", "rope_permutation", "read_state"]

CHECK_TOKENS = 8
#: the default model's Q8_0 draft against its float32 target: 0.997-0.99999 (keys and values, every layer); a
#: wrong rotary layout gives ~0
MIN_COSINE = 0.9
ROPE_NORM, ROPE_NEOX = 0, 2


@dataclass(frozen=True)
class Layout:
    """How a context's cache holds keys and values (what :func:`hand_off` writes)."""

    n_stream: int
    v_trans: bool
    k_type: int
    v_type: int
    perm: torch.Tensor | None  # the rotary permutation of a key's dimensions (None: transformers' own)


#: (GGUF path, sequences, layers, kv heads, head dim) -> the checked layout, or why the handoff is off
_CHECKED: dict[tuple, Layout | str] = {}


def rope_permutation(rope_type: int, head_dim: int) -> torch.Tensor | None:
    """Index ``p`` with ``llama_key = hf_key[..., p]`` for llama.cpp's ``rope_type``; None for NEOX (no change)."""
    if rope_type == ROPE_NEOX:
        return None
    if rope_type == ROPE_NORM:
        half = torch.arange(head_dim // 2)
        return torch.stack([half, half + head_dim // 2], 1).reshape(-1)
    raise SeqStateError(f"llama.cpp rope type {rope_type}: the handoff knows NORM (0) and NEOX (2)")


def read_state(runner: Any) -> SeqState:
    """The runner's sequence as llama.cpp saves it."""
    lib = runner._lib
    size = lib.llama_state_seq_get_size(runner._ctx, runner.seq)
    buf = (ctypes.c_uint8 * size)()
    got = lib.llama_state_seq_get_data(runner._ctx, buf, size, runner.seq)
    if got == 0:
        raise SeqStateError("llama.cpp saved no state for the sequence")
    return parse(bytes(buf)[:got])


def _rows(x: torch.Tensor, perm: torch.Tensor | None) -> torch.Tensor:
    """``[kv_heads, T, head_dim]`` -> llama.cpp rows ``[T, kv_heads * head_dim]`` (keys permuted by ``perm``)."""
    if perm is not None:
        x = x[..., perm]
    return on_host(x.transpose(0, 1).reshape(x.shape[1], -1).float())  # a CPU cache: reading it is no device sync


def _cosine(a: torch.Tensor, b: torch.Tensor, head_dim: int) -> float:
    return on_host(torch.nn.functional.cosine_similarity(a.reshape(-1, head_dim), b.reshape(-1, head_dim), dim=-1)
                   .mean()).item()


def _check(runner: Any, tokens: list[int], kv: PromptKV) -> Layout | str:
    """Feed the first tokens the ordinary way and compare llama.cpp's cache with the target's (module docstring)."""
    lib = runner._lib
    heads, _, head_dim = kv.layer(0)[0].shape
    try:
        perm = rope_permutation(int(lib.llama_model_rope_type(runner._model)), head_dim)
        n = min(CHECK_TOKENS, len(tokens))
        runner.truncate(0)
        runner.feed(tokens[:n])
        state = read_state(runner)
        runner.truncate(0)
        if len(state.keys) != kv.num_layers or state.cells != n:
            return f"llama.cpp holds {len(state.keys)} layers and {state.cells} cells, the target {kv.num_layers} and {n}"
        worst = 1.0
        for i in range(kv.num_layers):
            keys, values = (t[:, :n] for t in kv.layer(i))
            worst = min(worst, _cosine(from_rows(state.keys[i], state.k_types[i]), _rows(keys, perm), head_dim),
                        _cosine(from_rows(state.values[i], state.v_types[i]), _rows(values, None), head_dim))
        if worst < MIN_COSINE:
            return f"llama.cpp's keys and values differ from the target's (cosine {worst:.3f} < {MIN_COSINE})"
        return Layout(state.n_stream, state.v_trans, state.k_types[0], state.v_types[0], perm)
    except SeqStateError as err:
        runner.truncate(0)
        return str(err)


def hand_off(runner: Any, tokens: list[int], kv: PromptKV) -> str | None:
    """Write ``kv`` (the target's keys and values of ``tokens``, positions 0..) into the runner's sequence, replacing
    what it held; None when done, else why not (the runner is then empty, and takes ``tokens`` in itself)."""
    if kv.device.type != "cpu":
        return "the target's cache is not on the CPU"
    heads, length, head_dim = kv.layer(0)[0].shape
    if length < len(tokens):
        return f"the target's cache holds {length} positions, fewer than the {len(tokens)} tokens"
    key = (runner.path, runner._seqs, kv.num_layers, heads, head_dim)
    if key not in _CHECKED:
        _CHECKED[key] = _check(runner, tokens, kv)
    layout = _CHECKED[key]
    if isinstance(layout, str):
        return layout
    n = len(tokens)
    state = SeqState(seq=runner.seq, n_stream=layout.n_stream, v_trans=layout.v_trans,
                     positions=np.arange(n, dtype=np.int32))
    for i in range(kv.num_layers):
        keys, values = (t[:, :n] for t in kv.layer(i))
        state.k_types.append(layout.k_type)
        state.keys.append(to_rows(_rows(keys, layout.perm), layout.k_type))
        state.v_types.append(layout.v_type)
        state.values.append(to_rows(_rows(values, None), layout.v_type))
    blob = encode(state)
    buf = (ctypes.c_uint8 * len(blob)).from_buffer_copy(blob)
    if runner._lib.llama_state_seq_set_data(runner._ctx, buf, len(blob), runner.seq) != len(blob):
        runner._lib.llama_memory_seq_rm(runner._mem, runner.seq, 0, -1)
        return "llama.cpp did not read the state back"
    return None
