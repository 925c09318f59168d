#!/usr/bin/env bash
# Issue 35: the low-bit draft's format - the shipped Q4_1 GGUF against the same weights re-encoded by llama.cpp's
# quantiser as Q8_0 and Q5_1 (lowbit quant=...), against plain decoding; Spec-Bench first turns, two per category
# (26), 128 new tokens, T = 0, float32, 2 threads, one run, each method's whole call on one clock.
# Usage: bash experiments/2026-11-25-lowbit-formats/lowbit_formats.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-lowbit-formats/lowbit_formats.sh OUT_DIR}"
leap bench --methods ar,lowbit,lowbit-q8_0=lowbit,lowbit-q5_1=lowbit --method-arg lowbit-q8_0:quant=q8_0 \
    --method-arg lowbit-q5_1:quant=q5_1 --num-prompts 2 --first-turn-only --max-new-tokens 128 --temperature 0 \
    --threads 2 --seed 0 --quiet --out "$out/t0"
leap report "$out/t0"
