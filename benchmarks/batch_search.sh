#!/usr/bin/env bash
# Issue 37: the drafter search at batch level against the fixed drafters. Spec-Bench first turns, three per category
# (39), decoded B at a time, 128 new tokens, T = 0, float32, 2 threads, one run; one record per batch, each method's
# whole batched call on one clock; leap report's speedup is throughput over batched plain decoding (ar) with a
# t-interval over batches. Methods: lowbit (chains capped at 16, adapting per row), lowbit-auto (the cap chosen per
# step by the goodput bandit among 0, 2, 4 and 8), suffix, and leap-drafters (the search: its batchable options held
# by every row - prompt-lookup, suffix, gated, stand, lowbit, cascade - and the bandit over (drafter, cap) arms with
# caps 0, 2, 4, 8 and 16 climbed as a ladder, plain decoding among them; an empty memory: what it learns, it learns in the
# run). ARGS= adds --method-arg pairs (e.g. a leap-drafters-prior=leap-drafters method with memory=prior).
# Usage: [METHODS=ar,...] [ARGS='M:key=value ...'] bash benchmarks/batch_search.sh OUT_DIR [SIZES]
set -euo pipefail
out="${1:?usage: bash benchmarks/batch_search.sh OUT_DIR [SIZES]}"
for b in ${2:-4 8}; do
    leap bench --batch-size "$b" --methods "${METHODS:-ar,lowbit,lowbit-auto=lowbit,suffix,leap-drafters}" \
        --method-arg lowbit-auto:batch_cap=auto ${ARGS:+$(printf -- '--method-arg %s ' $ARGS)}--num-prompts 3 --first-turn-only \
        --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet --out "$out/b$b"
    leap report "$out/b$b"
done
