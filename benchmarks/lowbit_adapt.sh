#!/usr/bin/env bash
# Issue 34/35: lowbit's chain length adapted within each request (adapt=16: grows by 2 after a chain accepted whole,
# shrinks halfway towards the cut after a rejection, never below num_tokens) against the fixed chain of 6, both on
# the shipped Q4_1 and on its Q8_0 re-encoding, against plain decoding; Spec-Bench first turns, two per category
# (26), 128 new tokens, T = 0, float32, 2 threads, one run, each method's whole call on one clock.
# Usage: bash benchmarks/lowbit_adapt.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash benchmarks/lowbit_adapt.sh OUT_DIR}"
leap bench --methods ar,lowbit,lowbit-adapt=lowbit,lowbit-q8_0-adapt=lowbit --method-arg lowbit-adapt:adapt=16 \
    --method-arg lowbit-q8_0-adapt:adapt=16 --method-arg lowbit-q8_0-adapt:quant=q8_0 --num-prompts 2 \
    --first-turn-only --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet --out "$out/t0"
leap report "$out/t0"
