#!/usr/bin/env bash
# The batch search with its loss budget judged all in (judge_all_in, the default: the bandit's word that drafting pays
# is not taken once the run's drafting steps, every cost counted, have lost to plain steps) and by the bandit's word
# alone (batch_judge_all_in=false), from an empty memory and from the shipped prior, beside plain decoding and the
# fixed drafters, in one run per batch size at T = 0: leap's seed prompts (seed-1800.., never Spec-Bench; 64 at B = 8,
# 32 at B = 4: 8 batches each), 128 new tokens. Usage: [SIZES='8 4'] bash ab.sh OUT_DIR (needs `leap` installed, e.g.
# the README's venv; run from the repository or a worktree of the commit to measure).
set -euo pipefail
out="${1:?usage: [SIZES='8 4'] bash ab.sh OUT_DIR}"
mkdir -p "$out"
for b in ${SIZES:-8 4}; do
    n=$((8 * b))
    python -m leap.heads.prompts "$out/prompts-b$b.jsonl" 1800 "$n"
    leap bench --batch-size "$b" \
        --methods ar,lowbit-auto=lowbit,suffix-auto=suffix,leap-drafters,leap-drafters-bandit=leap-drafters,leap-drafters-prior=leap-drafters,leap-drafters-prior-bandit=leap-drafters \
        --method-arg lowbit-auto:batch_cap=auto --method-arg suffix-auto:batch_cap=auto \
        --method-arg leap-drafters-bandit:batch_judge_all_in=false \
        --method-arg leap-drafters-prior:memory=prior --method-arg leap-drafters-prior-bandit:memory=prior \
        --method-arg leap-drafters-prior-bandit:batch_judge_all_in=false --prompts "$out/prompts-b$b.jsonl" \
        --num-prompts "$n" --temperature 0 --device cpu --threads 2 --max-new-tokens 128 --seed 0 --quiet \
        --out "$out/b$b-t0"
done
