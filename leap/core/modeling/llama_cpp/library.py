"""What leap calls of llama-cpp-python's library besides the runner: quiet logs, safe model parameters, and
llama.cpp's own quantiser.

**AMX.** A llama.cpp built for an Intel CPU with AMX (Sapphire Rapids and later; ``GGML_NATIVE`` picks it up)
places the weights in AMX buffers ("extra buffer types"), and its AMX matrix product crashes the process on the
first decode (llama.cpp issue #20824; seen here with the default model's Q4_1 and Q8_0 files on a Xeon with
``AMX_INT8 = 1``: a segmentation fault in the first ``llama_decode``). :func:`model_params` turns the extra buffer
types off for such a build (weights in plain CPU buffers: no AMX, no repacking) and says so once on stderr;
``setup.sh`` builds llama.cpp without AMX, so the guard only fires for a build made elsewhere.

Who calls what: :class:`~leap.core.modeling.low_bit.LlamaCppRunner` silences llama.cpp's logs when it makes a
context and loads models with :func:`model_params`; :func:`~leap.core.modeling.low_bit.make_runner` re-encodes the
draft's GGUF with :func:`requantized` (``lowbit``'s ``quant`` setting); ``leap doctor`` reports :func:`has_amx`.
Re-exported by :mod:`leap.core.modeling.low_bit`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from leap.core.errors import SettingsError

__all__ = ["QUANTS", "requantized", "has_amx", "model_params"]


_SILENT: list = []  # the log callback, kept alive for the process


def _silence(llama_cpp) -> None:
    """llama.cpp logs every context it creates to stderr; leap's progress and results stay readable."""
    if not _SILENT:
        import ctypes

        @llama_cpp.llama_log_callback
        def _quiet(level, text, user_data):  # noqa: ARG001
            return None

        _SILENT.append(_quiet)
        llama_cpp.llama_log_set(_quiet, ctypes.c_void_p(0))


def has_amx(llama_cpp) -> bool:
    """Whether this llama.cpp build runs AMX kernels (its system info reports ``AMX_INT8 = 1``)."""
    info = llama_cpp.llama_print_system_info()
    info = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    return "AMX_INT8 = 1" in info


_WARNED: list[bool] = []


def model_params(llama_cpp):
    """``llama_model_default_params()``, with the extra buffer types off where the build has AMX (module
    docstring): the draft runs, without repacked weights, instead of crashing the process."""
    params = llama_cpp.llama_model_default_params()
    if has_amx(llama_cpp) and hasattr(params, "use_extra_bufts"):
        params.use_extra_bufts = False
        if not _WARNED:
            _WARNED.append(True)
            print("leap: this llama.cpp build uses AMX, whose matrix product crashes on decode (llama.cpp #20824); "
                  "the low-bit draft runs without AMX and repacked weights. `bash setup.sh` builds llama.cpp "
                  "without AMX.", file=sys.stderr)
    return params


#: llama.cpp formats the draft's GGUF may be re-encoded to (``native``: the file as shipped); llama.cpp's ftype names
QUANTS = {"native": None, "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K",
          "q5_1": "LLAMA_FTYPE_MOSTLY_Q5_1", "q5_0": "LLAMA_FTYPE_MOSTLY_Q5_0", "q4_1": "LLAMA_FTYPE_MOSTLY_Q4_1",
          "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
          # formats llama.cpp repacks for AVX2 matrix kernels (Q4_K where rows are a multiple of 256, IQ4_NL)
          "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "q4_k_s": "LLAMA_FTYPE_MOSTLY_Q4_K_S", "iq4_nl": "LLAMA_FTYPE_MOSTLY_IQ4_NL",
          # 16-bit copies of the shipped values (f16 holds Q4_1's scale-times-level values nearly exactly): the draft
          # closest to the float32 target, at twice Q8_0's bytes
          "f16": "LLAMA_FTYPE_MOSTLY_F16", "bf16": "LLAMA_FTYPE_MOSTLY_BF16"}


def requantized(path: str | Path, quant: str, threads: int | None = None) -> Path:
    """The GGUF at ``path`` re-encoded to ``quant`` by llama.cpp's own quantiser (``llama_model_quantize`` with
    requantising allowed: each tensor is dequantised and encoded again, so a format finer than the source's only
    re-encodes the source's values). Written once, atomically, under ``$LEAP_CACHE/gguf`` (keyed by the source's
    name, size and modification time); ``native`` returns ``path`` itself. Issue 35 measured the default model's
    Q4_1 re-encoded as Q8_0 drafting better and taking in long prompts faster on this CPU - the format is a
    searchable setting of ``lowbit`` (``quant``), decided by measurement, not assumed."""
    if quant not in QUANTS:
        raise SettingsError(f"unknown low-bit format {quant!r}; choose one of {', '.join(QUANTS)}")
    path = Path(path)
    if QUANTS[quant] is None:
        return path
    stat = path.stat()
    root = Path(os.environ.get("LEAP_CACHE", Path.home() / ".cache" / "leap")) / "gguf"
    out = root / f"{path.stem}.{stat.st_size}.{int(stat.st_mtime)}.{quant}.gguf"
    if out.is_file():
        return out
    import llama_cpp

    root.mkdir(parents=True, exist_ok=True)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANTS[quant])
    params.allow_requantize = True
    params.nthread = threads or torch.get_num_threads() or 1
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    _silence(llama_cpp)
    if llama_cpp.llama_model_quantize(str(path).encode(), str(tmp).encode(), params) != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise SettingsError(f"llama.cpp could not re-encode {path} as {quant} (fix: quant=native)")
    os.replace(tmp, out)
    return out
