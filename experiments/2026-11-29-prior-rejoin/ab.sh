#!/usr/bin/env bash
# The batch search from the shipped prior with its held drafters joining (rejoin, the default) and without
# (batch_rejoin=false), beside plain decoding and the fixed drafters, in one run at B = 8, T = 0: 64 of leap's seed
# prompts (seed-1700..1763, never Spec-Bench), 128 new tokens. Usage: bash ab.sh OUT_DIR (needs `leap` installed,
# e.g. the README's venv; run from the repository or a worktree of the commit to measure).
set -euo pipefail
out="${1:?usage: bash ab.sh OUT_DIR}"
mkdir -p "$out"
python -m leap.heads.prompts "$out/prompts.jsonl" 1700 64
leap bench --batch-size 8 --methods ar,lowbit-auto=lowbit,suffix-auto=suffix,leap-drafters-prior=leap-drafters,leap-drafters-held=leap-drafters \
    --method-arg lowbit-auto:batch_cap=auto --method-arg suffix-auto:batch_cap=auto \
    --method-arg leap-drafters-prior:memory=prior --method-arg leap-drafters-held:memory=prior \
    --method-arg leap-drafters-held:batch_rejoin=false --prompts "$out/prompts.jsonl" --num-prompts 64 \
    --temperature 0 --device cpu --threads 2 --max-new-tokens 128 --seed 0 --quiet --out "$out/b8-t0"
