#!/usr/bin/env bash
# Issue 34: a carried choice that holds up is carried again (SearchSettings.carry_renew, on for leap-drafters).
# Spec-Bench, 39 first turns, 128 new tokens, one run per temperature (TEMPS, default "0"), whole calls on one clock:
# plain decoding, lowbit fixed at its defaults, the search from an empty memory (leap-drafters), the same without
# renewal (leap-drafters-norenew: searched again every fifth request, as before) and the search from the shipped
# prior (leap-drafters-prior, memory=prior: leap/data/search_memory, made on leap's seed prompts, never Spec-Bench).
# The records' search_memory_at_start says which memory each started from.
# NORENEW=0 leaves leap-drafters-norenew out (the T = 1 run did, for time).
# Usage: bash experiments/2026-11-26-search-renew/search_renew.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-26-search-renew/search_renew.sh OUT_DIR}"
for temp in ${TEMPS:-0}; do
  norenew=(--methods ar,lowbit,leap-drafters,leap-drafters-norenew=leap-drafters,leap-drafters-prior=leap-drafters
           --method-arg leap-drafters-norenew:carry_renew=0)
  [ "${NORENEW:-1}" = 0 ] && norenew=(--methods ar,lowbit,leap-drafters,leap-drafters-prior=leap-drafters)
  leap bench "${norenew[@]}" --method-arg "leap-drafters-prior:memory=prior" \
      --num-prompts 3 --first-turn-only --max-new-tokens 128 --temperature "$temp" --threads 2 --seed 0 --quiet \
      --out "$out/t${temp}_128"
  leap report "$out/t${temp}_128" --baseline lowbit
done
