#!/usr/bin/env bash
# Issue 35: the KV handoff - lowbit takes the target's keys and values of the prompt instead of running llama.cpp
# over it (lowbit, the default) against lowbit taking the prompt in itself (lowbit-ingest: handoff=false), the
# search over drafters (leap-drafters, memory empty at the start) and plain decoding; Spec-Bench first turns, three
# per category (39), 128 new tokens, T = 0 and 1, float32, 2 threads, one run, each method's whole call on one clock.
# Usage: bash experiments/2026-11-25-handoff/handoff.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-handoff/handoff.sh OUT_DIR}"
for t in 0 1; do
    leap bench --methods ar,lowbit,lowbit-ingest=lowbit,leap-drafters --method-arg lowbit-ingest:handoff=false \
        --num-prompts 3 --first-turn-only --max-new-tokens 128 \
        --temperature "$t" --threads 2 --seed 0 --quiet --out "$out/t${t}_128"
    leap report "$out/t${t}_128"
    leap report "$out/t${t}_128" --baseline lowbit-ingest
done
