#!/usr/bin/env bash
# The B = 4, T = 1 regret cell with the kin rule's ablation beside the default, from both starts, in one run:
# `-point` is `--method-arg M:batch_kin_confidence=false` (the point estimates decide which kin drafts on).
# Usage: bash experiments/2026-12-02-kin-noise/ablation.sh OUT_DIR   (about 27 minutes on the 2-core AMD EPYC)
set -euo pipefail
out="${1:?usage: bash experiments/2026-12-02-kin-noise/ablation.sh OUT_DIR}"
leap bench --batch-size 4 --temperature 1 --num-prompts 6 --max-new-tokens 128 --seed 0 --quiet --first-turn-only \
    --methods "ar,lowbit-auto=lowbit,leap-drafters,leap-drafters-prior=leap-drafters,leap-drafters-point=leap-drafters,leap-drafters-prior-point=leap-drafters" \
    --method-arg lowbit-auto:batch_cap=auto \
    --method-arg leap-drafters-prior:memory=prior --method-arg leap-drafters-prior-point:memory=prior \
    --method-arg leap-drafters-point:batch_kin_confidence=false \
    --method-arg leap-drafters-prior-point:batch_kin_confidence=false \
    --device cpu --threads 2 --out "$out"
leap report "$out" --regret
