#!/usr/bin/env bash
# lowbit drafting with the GGUF as shipped (Q4_1, the default since this run's commit) against its Q8_0 re-encoding
# (the earlier default), the search over drafters (memory empty at the start) and plain decoding, on the machine at
# hand: Spec-Bench first turns, three per category (39), 128 new tokens, T = 0 and 1, float32, 2 threads, one run,
# each method's whole call on one clock. The format was chosen on leap's seed prompts (experiments/2026-11-25-draft-cost/draft_cost.py),
# never on these. Usage: bash experiments/2026-11-26-lowbit-native/lowbit_native.sh OUT_DIR [TEMPERATURES]
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-26-lowbit-native/lowbit_native.sh OUT_DIR [TEMPERATURES]}"
for t in ${2:-0 1}; do
    leap bench --methods ar,lowbit,lowbit-q8=lowbit,leap-drafters --method-arg lowbit-q8:quant=q8_0 \
        --num-prompts 3 --first-turn-only --max-new-tokens 128 \
        --temperature "$t" --threads 2 --seed 0 --quiet --out "$out/t${t}_128"
    leap report "$out/t${t}_128"
    leap report "$out/t${t}_128" --baseline lowbit-q8
done
