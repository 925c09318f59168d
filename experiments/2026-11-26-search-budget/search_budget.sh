#!/usr/bin/env bash
# Issue 34: search agents on the drafter space at equal wall-clock budgets. Each agent (LEAP's MCTS, random, Optuna's
# TPE, UCB) searches the default drafter space (leap-drafters: the drafters with their declared settings and the
# layers, 4 real steps a trial) for at most BUDGET seconds of each request - its space and set-up included
# (SearchSettings.budget_s) - then decodes the rest with the best it found. Every request searches from nothing: no
# memory, no carrying, no loss budget or give-up, so the curve is the agent's own sample efficiency. Beside them: plain
# decoding and lowbit fixed at its defaults. Spec-Bench, one first turn per category (13), 128 new tokens, T = 0, whole
# calls on one clock, one run per seed (SEEDS, default "0 1"). Then experiments/2026-11-26-search-budget-plot/search_budget_plot.py pools the seeds.
# Usage: bash experiments/2026-11-26-search-budget/search_budget.sh OUT_DIR   (~15 minutes per seed on 2 cores)
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-26-search-budget/search_budget.sh OUT_DIR}"
methods="ar,lowbit"
args=()
for agent in ${AGENTS:-leap random optuna-tpe ucb}; do
  for budget in ${BUDGETS:-0.25 1 2}; do
    label="${agent}-s${budget/./}"
    methods="$methods,$label=leap-drafters"
    for kv in agent=$agent budget_s=$budget budget=1000 memory=off carry_over=0 loss_budget=0 give_up=0; do
      args+=(--method-arg "$label:$kv")
    done
  done
done
for seed in ${SEEDS:-0 1}; do
  leap bench --methods "$methods" "${args[@]}" --num-prompts 1 --first-turn-only --max-new-tokens 128 \
      --temperature 0 --threads 2 --seed "$seed" --quiet --out "$out/seed$seed"
done
python experiments/2026-11-26-search-budget-plot/search_budget_plot.py "$out"/seed* --out "$out/summary.md" --plot "${PLOT:-$out/budget.png}"
