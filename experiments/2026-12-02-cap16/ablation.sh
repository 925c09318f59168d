#!/usr/bin/env bash
# The batch regret cells (benchmarks/regret.sh's b4-t0, b8-t0, b4-t1: the same prompts, methods and flags) with the
# search's old cap of 16 beside the default, from both starts, in one run each: `-c16` is
# `--method-arg M:batch_caps='0;2;4;8;16'`.
# Usage: [CELLS='b4-t0 b8-t0 b4-t1'] bash experiments/2026-12-02-cap16/ablation.sh OUT_DIR
# (on the 2-core AMD EPYC about 18, 20 and 32 minutes)
set -euo pipefail
out="${1:?usage: [CELLS='...'] bash experiments/2026-12-02-cap16/ablation.sh OUT_DIR}"
methods="ar,lowbit-auto=lowbit,suffix-auto=suffix,leap-drafters,leap-drafters-prior=leap-drafters"
methods="$methods,leap-drafters-c16=leap-drafters,leap-drafters-prior-c16=leap-drafters"
args=(--method-arg lowbit-auto:batch_cap=auto --method-arg suffix-auto:batch_cap=auto
      --method-arg leap-drafters-prior:memory=prior --method-arg leap-drafters-prior-c16:memory=prior
      --method-arg "leap-drafters-c16:batch_caps=0;2;4;8;16" --method-arg "leap-drafters-prior-c16:batch_caps=0;2;4;8;16")
for cell in ${CELLS:-b4-t0 b8-t0 b4-t1}; do
    b="${cell%%-*}"; b="${b#b}"; t="${cell#*-t}"; n=3; if [ "$cell" != b4-t0 ]; then n=6; fi
    leap bench --batch-size "$b" --methods "$methods" "${args[@]}" --num-prompts "$n" --temperature "$t" \
        --max-new-tokens 128 --seed 0 --quiet --first-turn-only --device cpu --threads 2 --out "$out/$cell"
    leap report "$out/$cell" --regret
done
