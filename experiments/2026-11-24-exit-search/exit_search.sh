#!/usr/bin/env bash
# Issue 19, exit heads with LEAP's search: `leap-drafters` over the two shipped exit heads (k = 10 and 20) with
# the exit-aware joint space (leap/search/drafter_space.py: only the units below an option's exit layer are its
# decisions; MCTS's subtree for it ends there; no layer-ratio band for it), beside the two exit chains alone.
# Spec-Bench first turns (one per category), 128 new tokens, T = 0, float32, 2 threads; the shipped heads (an
# empty $LEAP_CACHE, removed at the end: it holds the model's float weights).
# Usage: bash experiments/2026-11-24-exit-search/exit_search.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-24-exit-search/exit_search.sh OUT_DIR}"
mkdir -p "$out"
export LEAP_CACHE="$out/cache"
trap 'rm -rf "$out/cache"' EXIT  # the float weights cached there are not records
leap bench --methods ar,exit10=exit-head,exit20=exit-head,exit-search=leap-drafters --method-arg exit10:layer=10 \
    --method-arg exit20:layer=20 --method-arg "exit-search:drafters=exit-head:layer=10;exit-head:layer=20" \
    --num-prompts 1 --first-turn-only --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet \
    --out "$out/t0_128"
leap report "$out/t0_128"
