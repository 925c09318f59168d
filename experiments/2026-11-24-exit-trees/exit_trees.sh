#!/usr/bin/env bash
# Issue 19, the feature-layer table's "chain vs tree" for two exit layers k < L: exit heads (Kangaroo/DVI,
# `exit-head`, the shipped heads on k = 10 and 20) drafting chains, and EAGLE-2 trees drafted through the layers
# below k - one pass of them per depth, 3 deep, width 2, cut by OPT-Tree's calibrated budget (shape=opt,
# leap/core/decoding/exit_tree.py). Spec-Bench first turns (one per category), 128 new tokens, T = 0, float32,
# 2 threads; the shipped heads (an empty $LEAP_CACHE, removed at the end: it holds the model's float weights).
# Usage: bash experiments/2026-11-24-exit-trees/exit_trees.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-24-exit-trees/exit_trees.sh OUT_DIR}"
mkdir -p "$out"
export LEAP_CACHE="$out/cache"
trap 'rm -rf "$out/cache"' EXIT  # the float weights cached there are not records
args=(--method-arg exit10:layer=10 --method-arg exit10-tree:layer=10 --method-arg exit10-tree:shape=opt
      --method-arg exit20:layer=20 --method-arg exit20-tree:layer=20 --method-arg exit20-tree:shape=opt)
leap bench --methods ar,exit10=exit-head,exit10-tree=exit-head,exit20=exit-head,exit20-tree=exit-head "${args[@]}" \
    --num-prompts 1 --first-turn-only --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet \
    --out "$out/t0_128"
leap report "$out/t0_128"
