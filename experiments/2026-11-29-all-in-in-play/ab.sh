#!/usr/bin/env bash
# The batch search (and, with FIXED=1, the fixed drafters' cap bandits) with and without one batch flag, from an empty
# memory and from the shipped prior, beside plain decoding, in one run per cell: leap's seed prompts (seed-1800.., never
# Spec-Bench; 8 batches a cell), 128 new tokens. FLAG is the method argument (default batch_judge_all_in=true: the loss
# budget judged all in over the drafters in play), TAG the suffix of the flagged methods' names. Cells are B:T pairs.
# Usage: [CELLS='8:0 4:1'] [FLAG=batch_reward=progress TAG=progress FIXED=1] bash ab.sh OUT_DIR
# (needs `leap` installed, e.g. the README's venv; run from the repository or a worktree of the commit to measure).
set -euo pipefail
out="${1:?usage: [CELLS='8:0 4:1'] [FLAG=... TAG=... FIXED=1] bash ab.sh OUT_DIR}"
flag="${FLAG:-batch_judge_all_in=true}"; tag="${TAG:-all-in}"
mkdir -p "$out"
methods="ar,lowbit-auto=lowbit,suffix-auto=suffix"
args=(--method-arg lowbit-auto:batch_cap=auto --method-arg suffix-auto:batch_cap=auto)
if [ "${FIXED:-0}" = 1 ]; then
    methods="$methods,lowbit-auto-$tag=lowbit,suffix-auto-$tag=suffix"
    args+=(--method-arg "lowbit-auto-$tag:batch_cap=auto" --method-arg "suffix-auto-$tag:batch_cap=auto"
           --method-arg "lowbit-auto-$tag:$flag" --method-arg "suffix-auto-$tag:$flag")
fi
methods="$methods,leap-drafters,leap-drafters-$tag=leap-drafters,leap-drafters-prior=leap-drafters"
methods="$methods,leap-drafters-prior-$tag=leap-drafters"
args+=(--method-arg "leap-drafters-$tag:$flag" --method-arg leap-drafters-prior:memory=prior
       --method-arg "leap-drafters-prior-$tag:memory=prior" --method-arg "leap-drafters-prior-$tag:$flag")
for cell in ${CELLS:-8:0 4:1}; do
    b="${cell%%:*}"; t="${cell#*:}"; n=$((8 * b))
    python -m leap.heads.prompts "$out/prompts-b$b.jsonl" 1800 "$n"
    leap bench --batch-size "$b" --methods "$methods" "${args[@]}" --prompts "$out/prompts-b$b.jsonl" \
        --num-prompts "$n" --temperature "$t" --device cpu --threads 2 --max-new-tokens 128 --seed 0 --quiet \
        --out "$out/b$b-t$t"
done
