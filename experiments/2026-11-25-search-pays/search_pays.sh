#!/usr/bin/env bash
# Issues 34 and 35: the search over drafters, their declared settings (lowbit num_tokens 6/10/14) and the layers, with
# a memory of earlier requests that starts empty for the run (records: search_memory_at_start), against lowbit fixed
# at its defaults (Q8_0 re-encoding, chain adapted up to 16), lowbit at its earlier defaults (the shipped Q4_1,
# fixed chains of 6: lowbit-q4_1-6) and plain decoding; Spec-Bench first turns, three per category (39), 128 new
# tokens, T = 0 and 1, float32, 2 threads, one run, each method's whole call on one clock.
# Usage: bash experiments/2026-11-25-search-pays/search_pays.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-search-pays/search_pays.sh OUT_DIR}"
for t in 0 1; do
    leap bench --methods ar,lowbit,lowbit-q4_1-6=lowbit,leap-drafters --method-arg lowbit-q4_1-6:quant=native \
        --method-arg lowbit-q4_1-6:adapt=0 --num-prompts 3 --first-turn-only --max-new-tokens 128 \
        --temperature "$t" --threads 2 --seed 0 --quiet --out "$out/t${t}_128"
    leap report "$out/t${t}_128"
    leap report "$out/t${t}_128" --baseline lowbit
done
