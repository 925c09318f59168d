#!/usr/bin/env bash
# The batch search with its bar made again only while drafting is undecided (FLAGS, default batch_bar=0.2) beside the
# search as shipped before it (batch_bar=false), from an empty memory and from the shipped prior, with plain decoding
# and the fixed drafters FIXED (default lowbit-auto, the best fixed choice at B = 4 on the CPU) in the same run, as
# benchmarks/regret.sh's batch cells run them (same prompts, 128 tokens, seed 0, 2 threads, float32).
# Usage: [CELLS='b8-t0 b4-t0 b4-t1'] [FLAGS='batch_bar=0.2'] [SUFFIX=margin] [FIXED='lowbit-auto suffix-auto'] \
#        bash experiments/2026-12-07-bar-where-it-decides/ablation.sh OUT_DIR
set -euo pipefail
out="${1:?usage: [CELLS='b8-t0 b4-t0 b4-t1'] [FLAGS='...'] [SUFFIX=...] [FIXED='...'] bash $0 OUT_DIR}"
suffix="${SUFFIX:-margin}"
shipped=(--method-arg leap-drafters:batch_bar=false --method-arg leap-drafters-prior:batch_bar=false)
variant=(); for flag in ${FLAGS:-batch_bar=0.2}; do
    variant+=(--method-arg "leap-drafters-$suffix:$flag" --method-arg "leap-drafters-prior-$suffix:$flag"); done
prior=(--method-arg leap-drafters-prior:memory=prior --method-arg "leap-drafters-prior-$suffix:memory=prior")
methods="ar"; fixed=()
for m in ${FIXED:-lowbit-auto}; do methods="$methods,$m=${m%-auto}"; fixed+=(--method-arg "$m:batch_cap=auto"); done
methods="$methods,leap-drafters,leap-drafters-$suffix=leap-drafters"
methods="$methods,leap-drafters-prior=leap-drafters,leap-drafters-prior-$suffix=leap-drafters"
done_cells=()
for cell in ${CELLS:-b8-t0 b4-t0 b4-t1}; do
    b="${cell%%-*}"; b="${b#b}"; t="${cell#*-t}"; n=3; if [ "$cell" != b4-t0 ]; then n=6; fi
    leap bench --batch-size "$b" --methods "$methods" "${fixed[@]}" "${prior[@]}" "${shipped[@]}" "${variant[@]}" \
        --num-prompts "$n" --temperature "$t" --device cpu --threads 2 --max-new-tokens 128 --seed 0 --quiet \
        --first-turn-only --out "$out/$cell"
    done_cells+=("$out/$cell")
    leap report "${done_cells[@]}" --regret
done
