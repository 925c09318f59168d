#!/usr/bin/env bash
# Issue 34: the search with a memory built on prompts outside the evaluation set. First leap-drafters runs on 13 of
# leap's own seed prompts (leap.heads.prompts, Apache-2.0; seed-1400..1412, never Spec-Bench) and writes what it
# measured to OUT/warm_memory.json; then, on Spec-Bench (39 first turns, 128 new tokens, T = 0, one run, whole
# calls on one clock), the search starting from a copy of that memory (leap-drafters-warm), the search starting
# empty (leap-drafters), lowbit fixed at its defaults and plain decoding. The records' search_memory_at_start
# names the memory each started from.
# Usage: bash experiments/2026-11-25-search-warm/search_warm.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-25-search-warm/search_warm.sh OUT_DIR}"
mkdir -p "$out"
python -c "from leap.heads.prompts import write_prompt_file; write_prompt_file('$out/seed_prompts.jsonl', 1400, 13)"
leap bench --methods ar,leap-drafters --method-arg "leap-drafters:memory=$out/warm_memory.json" \
    --prompts "$out/seed_prompts.jsonl" --num-prompts 13 --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet \
    --out "$out/seed_run"
cp "$out/warm_memory.json" "$out/eval_memory.json"  # the evaluation run learns into a copy
leap bench --methods ar,lowbit,leap-drafters,leap-drafters-warm=leap-drafters \
    --method-arg "leap-drafters-warm:memory=$out/eval_memory.json" --num-prompts 3 --first-turn-only \
    --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet --out "$out/t0_128"
leap report "$out/t0_128"
leap report "$out/t0_128" --baseline lowbit
