#!/usr/bin/env bash
# Issue 34: SearchSettings.favourite_first (the memory's favourite as a request's first trial; settle once no option is
# remembered above the leader) against the default search, both from the shipped prior (memory=prior), beside plain
# decoding and lowbit fixed at its defaults. Spec-Bench 39 first turns, then the README's main-job prompt (three runs,
# the memory learning across them as in benchmarks/main_job.sh); 128 new tokens, T = 0, whole calls on one clock.
# Usage: bash experiments/2026-11-26-search-favourite/search_favourite.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-26-search-favourite/search_favourite.sh OUT_DIR}"
methods=(--methods ar,lowbit,leap-drafters-prior=leap-drafters,leap-drafters-fav=leap-drafters
         --method-arg "leap-drafters-prior:memory=prior" --method-arg "leap-drafters-fav:memory=prior"
         --method-arg "leap-drafters-fav:favourite_first=true")
leap bench "${methods[@]}" --num-prompts 3 --first-turn-only --max-new-tokens 128 --temperature 0 --threads 2 \
    --seed 0 --quiet --out "$out/t0_128"
leap report "$out/t0_128" --baseline lowbit
leap bench "${methods[@]}" --prompts benchmarks/main_job_prompt.jsonl --runs 3 --max-new-tokens 128 --temperature 0 \
    --threads 2 --seed 0 --quiet --out "$out/main_job"
leap report "$out/main_job"
