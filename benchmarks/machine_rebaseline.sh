#!/usr/bin/env bash
# The fixed lowbit, the search over drafters (leap-drafters, memory empty at the start) and plain decoding on the
# machine at hand, as every earlier record's machine changed (an AMD EPYC -> an Intel Xeon with AVX-512/AMX, 2 vCPUs
# each): Spec-Bench first turns, three per category (39), 128 new tokens, float32, 2 threads, one run per temperature,
# each method's whole call on one clock. Usage: bash benchmarks/machine_rebaseline.sh OUT_DIR [TEMPERATURES]
set -euo pipefail
out="${1:?usage: bash benchmarks/machine_rebaseline.sh OUT_DIR [TEMPERATURES]}"
for t in ${2:-0 1}; do
    leap bench --methods ar,lowbit,leap-drafters --num-prompts 3 --first-turn-only --max-new-tokens 128 \
        --temperature "$t" --threads 2 --seed 0 --quiet --out "$out/t${t}_128"
    leap report "$out/t${t}_128"
    leap report "$out/t${t}_128" --baseline lowbit
done
