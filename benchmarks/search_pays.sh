#!/usr/bin/env bash
# Issue 34: the search over drafters, their declared settings (lowbit num_tokens 6/10/14) and the layers, with a
# memory of earlier requests that starts empty for the run (records: search_memory_at_start), against lowbit fixed
# at its defaults and plain decoding; Spec-Bench first turns, three per category (39), 128 new tokens, T = 0 and 1,
# float32, 2 threads, one run, each method's whole call on one clock.
# Usage: bash benchmarks/search_pays.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash benchmarks/search_pays.sh OUT_DIR}"
leap bench --methods ar,lowbit,leap-drafters --num-prompts 3 --first-turn-only --max-new-tokens 128 \
    --temperature 0 --threads 2 --seed 0 --quiet --out "$out/t0_128"
leap report "$out/t0_128"
leap bench --methods ar,lowbit,leap-drafters --num-prompts 3 --first-turn-only --max-new-tokens 128 \
    --temperature 1 --threads 2 --seed 0 --quiet --out "$out/t1_128"
leap report "$out/t1_128"
