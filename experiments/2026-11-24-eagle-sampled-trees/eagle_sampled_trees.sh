#!/usr/bin/env bash
# Issue 19, sampled trees for the EAGLE head at T = 1: the head's sampled chain against two sampled trees of a
# fixed skeleton (leap/heads/drafter.py: shape=siblings - the chain of 6 plus one drawn alternative at every
# depth; shape=delayed - a trunk of 4, then 2 branches of 2), each node drawn from the head's own q by
# Gumbel-Top-K, all verified by Traversal Verification (--tree-verify traversal, which verifies chains too).
# Spec-Bench first turns (one per category), 128 new tokens, float32, 2 threads; the shipped head (an empty
# $LEAP_CACHE, removed at the end: it holds the model's float weights).
# Usage: bash experiments/2026-11-24-eagle-sampled-trees/eagle_sampled_trees.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-24-eagle-sampled-trees/eagle_sampled_trees.sh OUT_DIR}"
mkdir -p "$out"
export LEAP_CACHE="$out/cache"
trap 'rm -rf "$out/cache"' EXIT  # the float weights cached there are not records
leap bench --methods ar,eagle,eagle-siblings=eagle,eagle-delayed=eagle --method-arg eagle-siblings:shape=siblings \
    --method-arg eagle-siblings:width=2 --method-arg eagle-delayed:shape=delayed --tree-verify traversal \
    --num-prompts 1 --first-turn-only --max-new-tokens 128 --temperature 1 --threads 2 --seed 0 --quiet \
    --out "$out/t1_128"
leap report "$out/t1_128"
