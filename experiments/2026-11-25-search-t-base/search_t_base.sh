#!/usr/bin/env bash
# Issue 34: the search over drafters (leap-drafters, memory empty at the start) once a carried request reuses the last
# t_base instead of timing three plain steps, against lowbit at its defaults and plain decoding; Spec-Bench first
# turns, three per category (39), 128 new tokens, T = 0, float32, 2 threads, one run, whole calls on one clock.
# Usage: bash experiments/2026-11-25-search-t-base/search_t_base.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-search-t-base/search_t_base.sh OUT_DIR}"
leap bench --methods ar,lowbit,leap-drafters --num-prompts 3 --first-turn-only --max-new-tokens 128 \
    --temperature 0 --threads 2 --seed 0 --quiet --out "$out/t0_128"
leap report "$out/t0_128"
leap report "$out/t0_128" --baseline lowbit
