#!/usr/bin/env bash
# The batch regret cells (benchmarks/regret.sh's b4-t0, b8-t0, b4-t1: the same prompts, methods and flags) with the
# batch search at caps 0/2/4/8 (`leap-drafters`, `leap-drafters-prior`: the default of ee75a1c, where this ran) and at
# 0/2/4/8/16 (`-c16`: the default before and after it) side by side, from both starts, in one run each. Both sets are
# named explicitly, so a rerun at any commit compares the same two.
# Usage: [CELLS='b4-t0 b8-t0 b4-t1'] bash experiments/2026-12-02-cap16/ablation.sh OUT_DIR
# (on the 2-core AMD EPYC 11, 18 and 24 minutes at ee75a1c)
set -euo pipefail
out="${1:?usage: [CELLS='...'] bash experiments/2026-12-02-cap16/ablation.sh OUT_DIR}"
methods="ar,lowbit-auto=lowbit,suffix-auto=suffix,leap-drafters,leap-drafters-prior=leap-drafters"
methods="$methods,leap-drafters-c16=leap-drafters,leap-drafters-prior-c16=leap-drafters"
args=(--method-arg lowbit-auto:batch_cap=auto --method-arg suffix-auto:batch_cap=auto
      --method-arg leap-drafters-prior:memory=prior --method-arg leap-drafters-prior-c16:memory=prior
      --method-arg "leap-drafters:batch_caps=0;2;4;8" --method-arg "leap-drafters-prior:batch_caps=0;2;4;8"
      --method-arg "leap-drafters-c16:batch_caps=0;2;4;8;16" --method-arg "leap-drafters-prior-c16:batch_caps=0;2;4;8;16")
for cell in ${CELLS:-b4-t0 b8-t0 b4-t1}; do
    b="${cell%%-*}"; b="${b#b}"; t="${cell#*-t}"; n=3; if [ "$cell" != b4-t0 ]; then n=6; fi
    leap bench --batch-size "$b" --methods "$methods" "${args[@]}" --num-prompts "$n" --temperature "$t" \
        --max-new-tokens 128 --seed 0 --quiet --first-turn-only --device cpu --threads 2 --out "$out/$cell"
    leap report "$out/$cell" --regret
done
