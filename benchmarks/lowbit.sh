#!/usr/bin/env bash
# Issue 22: the low-bit self-draft beside gated and suffix on Spec-Bench, greedy and T = 1, one run, one process.
# Usage: bash benchmarks/lowbit.sh OUT_DIR [PROMPTS_PER_CATEGORY]   (then: leap report OUT_DIR)
set -euo pipefail
out="${1:?usage: bash benchmarks/lowbit.sh OUT_DIR [PROMPTS_PER_CATEGORY]}"
n="${2:-1}"
leap bench --methods ar,lowbit,gated,suffix --num-prompts "$n" --first-turn-only --temperature 0,1 \
    --max-new-tokens 128 --threads 2 --seed 0 --out "$out" --quiet
leap report "$out"
