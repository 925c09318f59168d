#!/usr/bin/env bash
# The batch search's loss budget judged beyond noise against its point estimate, in one run per cell: the search from
# an empty memory and from the shipped prior, each as shipped (judge_all_in=true: drafting counts as paid unless its
# all-in tally is below plain decoding) and with FLAGS (default judge_all_in=0.95: paid only once the tally's pooled
# speedup is above plain decoding beyond the noise of its steps) under the suffix -SUFFIX (default sure), beside plain
# decoding and the fixed drafters, as benchmarks/regret.sh's batch cells run them (same prompts, 128 tokens, seed 0,
# 2 threads, float32).
# Usage: [CELLS='b8-t0 b4-t0 b4-t1'] [FLAGS='batch_judge_all_in=0.95 batch_bar=true'] [SUFFIX=sure-bar] \
#        bash experiments/2026-12-07-judge-beyond-noise/ablation.sh OUT_DIR
set -euo pipefail
out="${1:?usage: [CELLS='b8-t0 b4-t0 b4-t1'] [FLAGS='...'] [SUFFIX=...] bash $0 OUT_DIR}"
suffix="${SUFFIX:-sure}"
variant=(); for flag in ${FLAGS:-batch_judge_all_in=0.95}; do
    variant+=(--method-arg "leap-drafters-$suffix:$flag" --method-arg "leap-drafters-prior-$suffix:$flag"); done
prior=(--method-arg leap-drafters-prior:memory=prior --method-arg "leap-drafters-prior-$suffix:memory=prior")
auto=(--method-arg lowbit-auto:batch_cap=auto --method-arg suffix-auto:batch_cap=auto)
methods="ar,lowbit-auto=lowbit,suffix-auto=suffix,leap-drafters,leap-drafters-$suffix=leap-drafters"
methods="$methods,leap-drafters-prior=leap-drafters,leap-drafters-prior-$suffix=leap-drafters"
done_cells=()
for cell in ${CELLS:-b8-t0 b4-t0 b4-t1}; do
    b="${cell%%-*}"; b="${b#b}"; t="${cell#*-t}"; n=3; if [ "$cell" != b4-t0 ]; then n=6; fi
    leap bench --batch-size "$b" --methods "$methods" "${auto[@]}" "${prior[@]}" "${variant[@]}" --num-prompts "$n" \
        --temperature "$t" --device cpu --threads 2 --max-new-tokens 128 --seed 0 --quiet --first-turn-only \
        --out "$out/$cell"
    done_cells+=("$out/$cell")
    leap report "${done_cells[@]}" --regret
done
