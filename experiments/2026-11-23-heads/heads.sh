#!/usr/bin/env bash
# Issue 19: the EAGLE head drafter (eagle: unstopped chains of 6 - min_confidence=0, the default when docs/data/heads_v2
# was measured from the head `leap train-head` wrote for the model;
# eagle-tree: EAGLE-2's dynamic tree of 16 nodes; eagle-opt: the same cut by OPT-Tree's calibrated budget)
# beside plain decoding and the low-bit self-draft on Spec-Bench first turns, greedy and T = 1.
# Usage: bash experiments/2026-11-23-heads/heads.sh OUT_DIR [PROMPTS_PER_CATEGORY]   (then: leap report OUT_DIR/t0, OUT_DIR/t1)
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-23-heads/heads.sh OUT_DIR [PROMPTS_PER_CATEGORY]}"
n="${2:-1}"
common=(--num-prompts "$n" --first-turn-only --max-new-tokens 128 --threads 2 --seed 0 --quiet)
leap bench --methods ar,eagle,eagle-tree=eagle,eagle-opt=eagle,lowbit --temperature 0 --out "$out/t0" "${common[@]}" \
    --method-arg eagle-tree:shape=eagle2 --method-arg eagle-opt:shape=opt --method-arg eagle:min_confidence=0
leap bench --methods ar,eagle,lowbit --temperature 1 --out "$out/t1" "${common[@]}" --method-arg eagle:min_confidence=0
leap report "$out/t0"
leap report "$out/t1"
