#!/usr/bin/env bash
# lowbit-auto (lowbit, the batch bandit's caps) over plain batched decoding at B = 4, T = 1, before and after a change:
# 24 of leap's seed prompts (seed-1600..1623, never Spec-Bench), 128 new tokens, two rounds, the two commits
# alternating, each run its own plain baseline. Usage: bash ab.sh BEFORE AFTER OUT_DIR (run from the repository; needs
# `leap` installed, e.g. the README's venv: each commit runs from a worktree of its own on PYTHONPATH).
set -euo pipefail
before="${1:?usage: bash ab.sh BEFORE AFTER OUT_DIR}"; after="${2:?}"; out="${3:?}"
mkdir -p "$out"
python -m leap.heads.prompts "$out/prompts.jsonl" 1600 24
for side in a b; do
    commit="$before"; [ "$side" = b ] && commit="$after"
    git worktree add -f "$out/wt_$side" "$commit" >/dev/null
done
for round in 1 2; do
    for side in a b; do
        (cd "$out/wt_$side" && PYTHONPATH="$out/wt_$side" leap bench --batch-size 4 --methods ar,lowbit-auto=lowbit \
            --method-arg lowbit-auto:batch_cap=auto --prompts "$out/prompts.jsonl" --num-prompts 24 --temperature 1 \
            --device cpu --threads 2 --max-new-tokens 128 --seed 0 --quiet --out "$out/$side$round")
    done
done
git worktree remove --force "$out/wt_a"; git worktree remove --force "$out/wt_b"
