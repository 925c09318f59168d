#!/usr/bin/env bash
# Issue 22: the low-bit self-draft (chain, sibling tree, cascade behind suffix) beside gated, suffix and
# transformers' prompt lookup on Spec-Bench first turns, greedy and T = 1, one process per temperature.
# Usage: bash experiments/2026-11-23-lowbit/lowbit.sh OUT_DIR [PROMPTS_PER_CATEGORY]   (then: leap report OUT_DIR/t0, OUT_DIR/t1)
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-23-lowbit/lowbit.sh OUT_DIR [PROMPTS_PER_CATEGORY]}"
n="${2:-1}"
common=(--num-prompts "$n" --first-turn-only --max-new-tokens 128 --threads 2 --seed 0 --quiet
        --method-arg lowbit-tree:shape=siblings)
leap bench --methods ar,lowbit,lowbit-tree=lowbit,cascade,gated,suffix,hf-pld --temperature 0 --out "$out/t0" "${common[@]}"
leap bench --methods ar,lowbit,lowbit-tree=lowbit,cascade,suffix --temperature 1 --out "$out/t1" "${common[@]}"
leap report "$out/t0"
leap report "$out/t1"
