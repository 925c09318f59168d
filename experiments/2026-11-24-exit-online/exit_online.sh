#!/usr/bin/env bash
# Issue 19, online learning for an exit head on layer k < L (DVI-style: `exit-head online=true`,
# leap/heads/exit_drafter.py): what it adds to the shipped offline exit head (k = 10) on Spec-Bench first turns
# (128 new tokens) and on long outputs of held-out seed prompts (leap.heads.prompts after the first 1,200,
# 512 new tokens). The head learns across the prompts of a run. T = 0, float32, 2 threads, empty $LEAP_CACHE
# (the shipped heads).
# Usage: bash experiments/2026-11-24-exit-online/exit_online.sh OUT_DIR [SEED_PROMPTS]
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-24-exit-online/exit_online.sh OUT_DIR [SEED_PROMPTS]}"
n="${2:-8}"
mkdir -p "$out"
export LEAP_CACHE="$out/cache"
trap 'rm -rf "$out/cache"' EXIT  # the float weights cached there are not records
python -m leap.heads.prompts "$out/prompts.jsonl" 1300 "$n"
methods=(--methods ar,exit10=exit-head,exit10-online=exit-head --method-arg exit10:layer=10
         --method-arg exit10-online:layer=10 --method-arg exit10-online:online=true)
leap bench "${methods[@]}" --num-prompts 1 --first-turn-only --max-new-tokens 128 --temperature 0 --threads 2 \
    --seed 0 --quiet --out "$out/spec_bench_128"
leap bench "${methods[@]}" --prompts "$out/prompts.jsonl" --num-prompts "$n" --max-new-tokens 512 --temperature 0 \
    --threads 2 --seed 0 --quiet --out "$out/seed_512"
leap report "$out/spec_bench_128"
leap report "$out/seed_512"
