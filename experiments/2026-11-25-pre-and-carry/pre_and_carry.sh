#!/usr/bin/env bash
# Issues 35 and 34: lowbit's multi-level draft (lowbit-pre: pre=lookup, prompt lookup guessing the chain, the draft
# checking the guesses in one pass) against lowbit at its defaults, and the search over drafters (leap-drafters, memory
# empty at the start) with a carried choice held to the memory's best; Spec-Bench first turns, three per category
# (39), 128 new tokens, T = 0 and 1, float32, 2 threads, one run, each method's whole call on one clock.
# Usage: bash experiments/2026-11-25-pre-and-carry/pre_and_carry.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-pre-and-carry/pre_and_carry.sh OUT_DIR}"
for t in 0 1; do
    leap bench --methods ar,lowbit,lowbit-pre=lowbit,leap-drafters --method-arg lowbit-pre:pre=lookup \
        --num-prompts 3 --first-turn-only --max-new-tokens 128 \
        --temperature "$t" --threads 2 --seed 0 --quiet --out "$out/t${t}_128"
    leap report "$out/t${t}_128"
    leap report "$out/t${t}_128" --baseline lowbit
done
