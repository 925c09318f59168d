#!/usr/bin/env bash
# The batch regret cells (benchmarks/regret.sh's b8-t0, b4-t0, b4-t1: the same prompts and flags) with each batch's
# own bar (the default: leap.core.policies.batch_bar) and with the bar carried across batches (`-carried`:
# batch_bar=false, the ablation), for the batch search from both starts and for lowbit-auto, in one run each.
# Usage: [CELLS='b8-t0 b4-t0 b4-t1'] bash experiments/2026-12-03-batch-bar/ablation.sh OUT_DIR
set -euo pipefail
out="${1:?usage: [CELLS='...'] bash experiments/2026-12-03-batch-bar/ablation.sh OUT_DIR}"
methods="ar,lowbit-auto=lowbit,lowbit-auto-carried=lowbit,suffix-auto=suffix,leap-drafters,leap-drafters-prior=leap-drafters"
methods="$methods,leap-drafters-carried=leap-drafters,leap-drafters-prior-carried=leap-drafters"
args=(--method-arg lowbit-auto:batch_cap=auto --method-arg lowbit-auto-carried:batch_cap=auto
      --method-arg lowbit-auto-carried:batch_bar=false --method-arg suffix-auto:batch_cap=auto
      --method-arg leap-drafters-prior:memory=prior --method-arg leap-drafters-prior-carried:memory=prior
      --method-arg leap-drafters-carried:batch_bar=false --method-arg leap-drafters-prior-carried:batch_bar=false)
for cell in ${CELLS:-b8-t0 b4-t0 b4-t1}; do
    b="${cell%%-*}"; b="${b#b}"; t="${cell#*-t}"; n=3; if [ "$cell" != b4-t0 ]; then n=6; fi
    leap bench --batch-size "$b" --methods "$methods" "${args[@]}" --num-prompts "$n" --temperature "$t" \
        --max-new-tokens 128 --seed 0 --quiet --first-turn-only --device cpu --threads 2 --out "$out/$cell"
    leap report "$out/$cell" --regret
done
