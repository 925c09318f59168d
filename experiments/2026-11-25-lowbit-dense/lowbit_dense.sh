#!/usr/bin/env bash
# Issue 35 (T = 1): lowbit drawing its sampled drafts from the draft's whole distribution (lowbit: top_k=0, the
# default since this script) against its earlier cut to the 64 most likely tokens (lowbit-k64: top_k=64), the search
# over drafters (leap-drafters, memory empty at the start) and plain decoding; Spec-Bench first turns, three per
# category (39), 128 new tokens, T = 1 (seed 0), float32, 2 threads, one run, each method's whole call on one clock.
# Greedy decoding never reads top_k, so T = 0 is not rerun. The expected acceptance behind the change:
# python experiments/2026-11-25-lowbit-top-k/lowbit_top_k.py (leap's seed prompts, never Spec-Bench).
# Usage: bash experiments/2026-11-25-lowbit-dense/lowbit_dense.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-lowbit-dense/lowbit_dense.sh OUT_DIR}"
leap bench --methods ar,lowbit,lowbit-k64=lowbit,leap-drafters --method-arg lowbit-k64:top_k=64 \
    --num-prompts 3 --first-turn-only --max-new-tokens 128 \
    --temperature 1 --threads 2 --seed 0 --quiet --out "$out/t1_128"
leap report "$out/t1_128"
leap report "$out/t1_128" --baseline lowbit-k64
