"""llama_cpp/library.py: the model parameters that keep an AMX build of llama.cpp from crashing the process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from leap.core.modeling.llama_cpp import library

llama_cpp = pytest.importorskip("llama_cpp")


def _with_info(monkeypatch, info: bytes) -> None:
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: info)


def test_an_amx_build_loads_without_extra_buffer_types_and_says_so_once(monkeypatch, capsys):
    _with_info(monkeypatch, b"CPU : AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |")
    monkeypatch.setattr(library, "_WARNED", [])
    assert library.has_amx(llama_cpp)
    assert library.model_params(llama_cpp).use_extra_bufts is False
    library.model_params(llama_cpp)
    assert capsys.readouterr().err.count("AMX") >= 1 and len(library._WARNED) == 1


def test_a_build_without_amx_keeps_llama_cpps_defaults(monkeypatch):
    _with_info(monkeypatch, b"CPU : AVX2 = 1 | FMA = 1 | AMX_INT8 = 0 | REPACK = 1 |")
    assert not library.has_amx(llama_cpp)
    assert library.model_params(llama_cpp).use_extra_bufts == llama_cpp.llama_model_default_params().use_extra_bufts


def test_the_runner_loads_its_model_with_these_parameters(monkeypatch, tmp_path):
    """LlamaCppRunner hands llama.cpp what model_params returns (not llama.cpp's defaults)."""
    from leap.core.errors import SettingsError
    from leap.core.modeling.low_bit import LlamaCppRunner

    _with_info(monkeypatch, b"AMX_INT8 = 1")
    seen = []
    monkeypatch.setattr(llama_cpp, "llama_model_load_from_file", lambda path, params: seen.append(params) or None)
    with pytest.raises(SettingsError, match="could not load"):
        LlamaCppRunner(tmp_path / "absent.gguf", n_ctx=16, threads=1)
    assert [p.use_extra_bufts for p in seen] == [False]


@pytest.mark.slow
def test_the_default_gguf_decodes_in_a_child_process():
    """The crash this guards against kills the process, so the real decode runs in a child (doctor does the same)."""
    from leap.cli.doctor import _llama_cpp

    finding = _llama_cpp()
    assert finding.status in ("ok", "warn") and "49152 logits" in finding.message, finding


def test_each_re_encoded_format_is_its_own_file(monkeypatch, tmp_path):
    """Issue 54: a format sweep (``lowbit``'s ``quant``) must measure each format; a cache key without the format would
    hand the first one encoded to every later one (red when the format leaves the file's name)."""
    monkeypatch.setenv("LEAP_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "model.gguf"
    source.write_bytes(b"GGUF" + bytes(8))
    encoded = []

    def fake_quantize(src, dst, params):
        encoded.append(params.ftype)
        with open(dst, "wb") as f:
            f.write(f"{src.decode()} as {params.ftype}".encode())
        return 0

    monkeypatch.setattr(llama_cpp, "llama_model_quantize", fake_quantize)
    assert library.requantized(source, "native") == source
    q8 = library.requantized(source, "q8_0")
    q4 = library.requantized(source, "q4_0")
    assert q8 != q4 and q8.read_bytes() != q4.read_bytes()
    assert library.requantized(source, "q8_0") == q8  # encoded once, then read from the cache
    assert encoded == [llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0]
