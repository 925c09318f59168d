#!/usr/bin/env bash
# Issue 14's tables: stand chains and trees, OPT-Tree, Traversal Verification vs the existing rule, and
# transformers' prompt lookup, at T = 1 and T = 0 on Spec-Bench (3 first-turn prompts per category).
# Usage: bash experiments/2026-11-22-sampling-trees/sampling_trees.sh [OUT_PREFIX]   (about 45 minutes on a 2-core CPU)
set -euo pipefail
out=${1:-results/sampling_trees}
leap calibrate --refresh >/dev/null  # the machine's costs (OPT-Tree's budget reads them), stand's overhead included
tv=(--method-arg stand-tv:tree_verify=traversal
    --method-arg stand-opt-tv:shape=opt --method-arg stand-opt-tv:tree_verify=traversal
    --method-arg stand-delayed-tv:shape=delayed --method-arg stand-delayed-tv:tree_verify=traversal)
# T = 1: stand chains and trees under each tree rule (match = the existing rule: speculative sampling on chains)
leap bench --methods ar,hf-pld,gated,stand,stand-tv=stand,stand-opt=stand,stand-opt-tv=stand,stand-delayed-tv=stand \
  "${tv[@]}" --method-arg stand-opt:shape=opt --num-prompts 3 --first-turn-only --temperature 1 \
  --max-new-tokens 128 --threads 2 --out "${out}_T1" --quiet --resume
# T = 0: greedy verification is exact match under every rule, so the -tv rows would repeat their twins
leap bench --methods ar,hf-pld,gated,stand,stand-opt=stand,stand-delayed=stand \
  --method-arg stand-opt:shape=opt --method-arg stand-delayed:shape=delayed \
  --num-prompts 3 --first-turn-only --temperature 0 --max-new-tokens 128 --threads 2 --out "${out}_T0" --quiet --resume
