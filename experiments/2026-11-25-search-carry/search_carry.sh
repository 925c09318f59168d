#!/usr/bin/env bash
# Issue 34: the search carrying a choice its memory ranks near the best (a carried choice is judged by its own
# remembered mean against the best option's, not by one request's speed against a mean over other prompts), with
# lowbit fixed at its defaults and plain decoding; Spec-Bench first turns, three per category (39), 128 new tokens,
# T = 0 and 1 (seed 0), float32, 2 threads, one run, each method's whole call on one clock; the search's memory
# empty at the start of each temperature's run. Per stop kind: python experiments/2026-11-25-search-stops/search_stops.py OUT_DIR/t0_128
# Usage: bash experiments/2026-11-25-search-carry/search_carry.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-search-carry/search_carry.sh OUT_DIR}"
for t in 0 1; do
    leap bench --methods ar,lowbit,leap-drafters --num-prompts 3 --first-turn-only --max-new-tokens 128 \
        --temperature "$t" --threads 2 --seed 0 --quiet --out "$out/t${t}_128"
    leap report "$out/t${t}_128"
    leap report "$out/t${t}_128" --baseline lowbit
    python experiments/2026-11-25-search-stops/search_stops.py "$out/t${t}_128"
done
