#!/usr/bin/env bash
# Issue 19: choose eagle's min_confidence on held-out seed prompts (leap.heads.prompts after the first 1,200,
# which trained the shipped head; never Spec-Bench), so the default is not tuned on the evaluation prompts.
# Usage: bash experiments/2026-11-23-heads-tuning/heads_tuning.sh OUT_DIR [PROMPTS]
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-23-heads-tuning/heads_tuning.sh OUT_DIR [PROMPTS]}"
n="${2:-13}"
mkdir -p "$out"
python -m leap.heads.prompts "$out/prompts.jsonl" 1200 "$n"  # held out: the shipped head trained on the first 1,200
leap bench --prompts "$out/prompts.jsonl" --methods ar,eagle,eagle-c3=eagle,eagle-c5=eagle \
    --method-arg eagle:min_confidence=0 --method-arg eagle-c3:min_confidence=0.3 --method-arg eagle-c5:min_confidence=0.5 \
    --num-prompts "$n" --temperature 0 --out "$out/t0" --max-new-tokens 128 --threads 2 --seed 0 --quiet
leap report "$out/t0"
