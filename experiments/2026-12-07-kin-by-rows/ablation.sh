#!/usr/bin/env bash
# The B = 4, T = 1 regret cell with the kin compared row count by row count (the default) beside the pooled test
# (`-pooled`: --method-arg M:batch_kin_by_rows=false), from an empty memory and from the shipped prior, with plain
# decoding and both kin as fixed drafters (`lowbit-auto`, `cascade-auto`) in the same run, as benchmarks/regret.sh's
# b4-t1 cell runs them (78 Spec-Bench first turns in 20 batches of 4, 128 tokens, seed 0, 2 threads, float32).
# Usage: bash experiments/2026-12-07-kin-by-rows/ablation.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-12-07-kin-by-rows/ablation.sh OUT_DIR}"
leap bench --batch-size 4 --temperature 1 --num-prompts 6 --max-new-tokens 128 --seed 0 --quiet --first-turn-only \
    --methods "ar,lowbit-auto=lowbit,cascade-auto=cascade,leap-drafters,leap-drafters-pooled=leap-drafters,leap-drafters-prior=leap-drafters,leap-drafters-prior-pooled=leap-drafters" \
    --method-arg lowbit-auto:batch_cap=auto --method-arg cascade-auto:batch_cap=auto \
    --method-arg leap-drafters-prior:memory=prior --method-arg leap-drafters-prior-pooled:memory=prior \
    --method-arg leap-drafters-pooled:batch_kin_by_rows=false \
    --method-arg leap-drafters-prior-pooled:batch_kin_by_rows=false \
    --device cpu --threads 2 --out "$out"
leap report "$out" --regret
