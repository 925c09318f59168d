#!/usr/bin/env bash
# Issue 34: search agents on the drafter space, side by side. The drafter search (leap-drafters: the default drafters
# with their declared settings and the layers, 4 steps a trial, carry and renewal as shipped, memory empty at the start
# so the agents' exploring shows) run by LEAP's MCTS, UCB, random, Optuna's TPE and bayes (Optuna's GP), beside plain
# decoding and lowbit fixed at its defaults. Spec-Bench, one first turn per category (13), 128 new tokens, T = 0, one
# run, one seed, whole calls on one clock: the same requests for every agent, not the same wall-clock budget.
# Usage: bash experiments/2026-11-26-search-agents/search_agents.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-26-search-agents/search_agents.sh OUT_DIR}"
leap bench --methods ar,lowbit,leap-drafters,drafters-ucb=leap-drafters,drafters-random=leap-drafters,drafters-tpe=leap-drafters,drafters-bayes=leap-drafters \
    --method-arg drafters-ucb:agent=ucb --method-arg drafters-random:agent=random \
    --method-arg drafters-tpe:agent=optuna-tpe --method-arg drafters-bayes:agent=bayes \
    --num-prompts 1 --first-turn-only --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet \
    --out "$out/t0_128"
leap report "$out/t0_128" --baseline lowbit
