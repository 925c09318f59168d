#!/usr/bin/env bash
# Issue 34: the search over drafters (leap-drafters, memory empty at the start) once cascade's lowbit part also takes
# the target's prompt cache (no llama.cpp pass over a long prompt when the space is set up), against lowbit at its
# defaults and plain decoding; Spec-Bench first turns, three per category (39), 128 new tokens, T = 0, float32,
# 2 threads, one run, whole calls on one clock.
# Usage: bash experiments/2026-11-25-search-cascade-handoff/search_cascade_handoff.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-search-cascade-handoff/search_cascade_handoff.sh OUT_DIR}"
leap bench --methods ar,lowbit,leap-drafters --num-prompts 3 --first-turn-only --max-new-tokens 128 \
    --temperature 0 --threads 2 --seed 0 --quiet --out "$out/t0_128"
leap report "$out/t0_128"
leap report "$out/t0_128" --baseline lowbit
