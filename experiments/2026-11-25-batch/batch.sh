#!/usr/bin/env bash
# Issue 37: speculation for batches. Spec-Bench first turns, three per category (39), decoded B at a time (B = 2, 4,
# 8; the last batch smaller), 128 new tokens, T = 0, float32, 2 threads, one run; one record per batch, each method's
# whole batched call on one clock, so leap report's speedup is throughput over batched plain decoding (ar), with a
# t-interval over batches. Methods: lowbit (one llama.cpp context, a sequence per row, every row's next draft token
# in one pass; chains capped at 16 and adapting per row), lowbit-4 (chains capped at 4), lowbit-auto (the cap
# chosen per step by the goodput bandit among 0 (no drafting), 2, 4 and 8), suffix (model-free, per row).
# Usage: bash experiments/2026-11-25-batch/batch.sh OUT_DIR [SIZES]
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-batch/batch.sh OUT_DIR [SIZES]}"
for b in ${2:-2 4 8}; do
    leap bench --batch-size "$b" --methods ar,lowbit,lowbit-4=lowbit,lowbit-auto=lowbit,suffix \
        --method-arg lowbit-4:batch_cap=4 --method-arg lowbit-auto:batch_cap=auto --num-prompts 3 --first-turn-only \
        --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet --out "$out/b$b"
    leap report "$out/b$b"
done
