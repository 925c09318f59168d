#!/usr/bin/env bash
# Issue 34: a request that ends inside its search carries its best option only after two trials of it there (one
# lucky few-step trial carried losers on in docs/data/xeon_rebaseline and docs/data/lowbit_native). The search over
# drafters (memory empty at the start), lowbit at its defaults and plain decoding: Spec-Bench first turns, three per
# category (39), 128 new tokens, float32, 2 threads, one run per temperature, whole calls on one clock.
# Usage: bash benchmarks/search_two_trials.sh OUT_DIR [TEMPERATURES]
set -euo pipefail
out="${1:?usage: bash benchmarks/search_two_trials.sh OUT_DIR [TEMPERATURES]}"
for t in ${2:-0 1}; do
    leap bench --methods ar,lowbit,leap-drafters --num-prompts 3 --first-turn-only --max-new-tokens 128 \
        --temperature "$t" --threads 2 --seed 0 --quiet --out "$out/t${t}_128"
    leap report "$out/t${t}_128"
    leap report "$out/t${t}_128" --baseline lowbit
done
