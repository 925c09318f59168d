#!/usr/bin/env bash
# Issue 34/35: lowbit's longest adapted chain (adapt, default 16) once plain decoding and verification got faster with
# the linears measured per machine (docs/core.md): a verification over 13 tokens costs 1.8 plain steps with torch's
# linears here against 1.35 packed, so a shorter longest chain may pay. On 20 of leap's own seed prompts
# (seed-2000..2019, never Spec-Bench), 128 new tokens, T = 0, one run, whole calls: plain decoding and lowbit with
# adapt 8, 12, 16 (its default) and 24.
# Usage: bash experiments/2026-11-25-lowbit-adapt/lowbit_adapt.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-lowbit-adapt/lowbit_adapt.sh OUT_DIR}"
mkdir -p "$out"
python -c "from leap.heads.prompts import write_prompt_file; write_prompt_file('$out/seed_prompts.jsonl', 2000, 20)"
leap bench --methods ar,lowbit,lowbit-a8=lowbit,lowbit-a12=lowbit,lowbit-a24=lowbit \
    --method-arg lowbit-a8:adapt=8 --method-arg lowbit-a12:adapt=12 --method-arg lowbit-a24:adapt=24 \
    --prompts "$out/seed_prompts.jsonl" --num-prompts 20 \
    --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet --out "$out/t0_128"
leap report "$out/t0_128"
leap report "$out/t0_128" --baseline lowbit
