#!/usr/bin/env bash
# The prior's rescale measured against its ablation in one run: regret.sh's long-t0 cell (Spec-Bench's summarization
# and rag first turns, ten each, T = 0, 128 new tokens) with the search from the shipped prior twice, as leap ships it
# (`leap-drafters-prior`) and with the prior's scale kept (`leap-drafters-prior-unscaled`, memory_rescale=false),
# interleaved per prompt beside plain decoding and `lowbit`. About 9 minutes on a 2-core Intel Xeon.
# Usage: bash experiments/2026-12-02-prior-scale/ablation.sh OUT_DIR; then leap report OUT_DIR/long-t0 --regret
set -euo pipefail
out="${1:?usage: bash experiments/2026-12-02-prior-scale/ablation.sh OUT_DIR}"
leap bench --methods ar,lowbit,leap-drafters-prior=leap-drafters,leap-drafters-prior-unscaled=leap-drafters \
    --method-arg leap-drafters-prior:memory=prior --method-arg leap-drafters-prior-unscaled:memory=prior \
    --method-arg leap-drafters-prior-unscaled:memory_rescale=false \
    --categories summarization,rag --num-prompts 10 --temperature 0 --device cpu --threads 2 \
    --max-new-tokens 128 --seed 0 --quiet --first-turn-only --out "$out/long-t0"
leap report "$out/long-t0" --regret
