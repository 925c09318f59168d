#!/usr/bin/env bash
# Issue 34: the search memory's ageing (discounted means, horizon 8; a pruned option rechecked after 16 requests) against
# plain running means that never recheck (memory_horizon=0, memory_recheck=0), both starting from the shipped prior
# (memory=prior: leap/data/search_memory, made on leap's seed prompts, never Spec-Bench), beside plain decoding and lowbit
# fixed at its defaults. Spec-Bench, 39 first turns, 128 new tokens, T = 0, one run, whole calls on one clock.
# Usage: bash experiments/2026-11-26-search-ageing/search_ageing.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-26-search-ageing/search_ageing.sh OUT_DIR}"
leap bench --methods ar,lowbit,leap-drafters-prior=leap-drafters,leap-drafters-noage=leap-drafters \
    --method-arg "leap-drafters-prior:memory=prior" --method-arg "leap-drafters-noage:memory=prior" \
    --method-arg "leap-drafters-noage:memory_horizon=0" --method-arg "leap-drafters-noage:memory_recheck=0" \
    --num-prompts 3 --first-turn-only --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet \
    --out "$out/t0_128"
leap report "$out/t0_128" --baseline lowbit
