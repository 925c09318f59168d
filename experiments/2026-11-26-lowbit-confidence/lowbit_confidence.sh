#!/usr/bin/env bash
# Issue 34/35: does a confidence cut pay for lowbit's chains? The README's main job drafts 82 tokens for 65 kept
# (`leap generate ... --drafter lowbit --profile`: acceptance 67%, a draft token 0.24 of a plain step), so a chain cut
# where the draft is unsure (min_confidence: stop at a token whose draft probability is below it) could save the
# tokens that verification throws away. On 20 of leap's own seed prompts (seed-2000..2019, never Spec-Bench),
# 128 new tokens, T = 0, one run, whole calls: plain decoding, lowbit at its defaults and with cuts 0.1, 0.3, 0.5.
# Usage: bash experiments/2026-11-26-lowbit-confidence/lowbit_confidence.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-26-lowbit-confidence/lowbit_confidence.sh OUT_DIR}"
mkdir -p "$out"
python -c "from leap.heads.prompts import write_prompt_file; write_prompt_file('$out/seed_prompts.jsonl', 2000, 20)"
leap bench --methods ar,lowbit,lowbit-c1=lowbit,lowbit-c3=lowbit,lowbit-c5=lowbit \
    --method-arg lowbit-c1:min_confidence=0.1 --method-arg lowbit-c3:min_confidence=0.3 \
    --method-arg lowbit-c5:min_confidence=0.5 --prompts "$out/seed_prompts.jsonl" --num-prompts 20 \
    --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet --out "$out/t0_128"
leap report "$out/t0_128"
