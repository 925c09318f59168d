#!/usr/bin/env bash
# Issue 34: the search over drafters (leap-drafters, memory empty at the start) after the memory's fix - an option
# counts once per request, the kept one by its fixed phase, not its 4-step trial - against lowbit at its defaults (the
# KV handoff on) and plain decoding; Spec-Bench first turns, three per category (39), 128 new tokens, T = 0 and 1,
# float32, 2 threads, one run, each method's whole call on one clock.
# Usage: bash experiments/2026-11-25-search-memory-fix/search_memory_fix.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-search-memory-fix/search_memory_fix.sh OUT_DIR}"
for t in 0 1; do
    leap bench --methods ar,lowbit,leap-drafters --num-prompts 3 --first-turn-only --max-new-tokens 128 \
        --temperature "$t" --threads 2 --seed 0 --quiet --out "$out/t${t}_128"
    leap report "$out/t${t}_128"
    leap report "$out/t${t}_128" --baseline lowbit
done
