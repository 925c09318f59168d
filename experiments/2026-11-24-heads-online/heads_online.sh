#!/usr/bin/env bash
# Issue 19, online learning: what the head's online self-distillation (eagle online=True, DVI/OSD-style,
# leap/heads/online.py) adds over the offline head, on Spec-Bench first turns (text unlike the seed prompts
# the head trained on) and on long outputs of held-out seed prompts (leap.heads.prompts after the first 1,200).
# The head learns across the prompts of a run, as a server's would. T = 0, float32, 2 threads.
# Usage: bash experiments/2026-11-24-heads-online/heads_online.sh OUT_DIR [SEED_PROMPTS]
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-24-heads-online/heads_online.sh OUT_DIR [SEED_PROMPTS]}"
n="${2:-8}"
mkdir -p "$out"
python -m leap.heads.prompts "$out/prompts.jsonl" 1300 "$n"  # held out: the shipped head trained on the first 1,200
methods=(--methods ar,eagle,eagle-online=eagle --method-arg eagle-online:online=true)
leap bench "${methods[@]}" --num-prompts 1 --first-turn-only --max-new-tokens 256 --temperature 0 --threads 2 \
    --seed 0 --quiet --out "$out/spec_bench_256"
leap bench "${methods[@]}" --prompts "$out/prompts.jsonl" --num-prompts "$n" --max-new-tokens 512 --temperature 0 \
    --threads 2 --seed 0 --quiet --out "$out/seed_512"
leap report "$out/spec_bench_256"
leap report "$out/seed_512"
