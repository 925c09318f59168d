#!/usr/bin/env bash
# Issue 34: the search memory's shipped prior, then the search from it on Spec-Bench.
# 1. The prior: leap-drafters (T = 0, 128 new tokens) on 20 of leap's own seed prompts (leap.heads.prompts,
#    Apache-2.0, seed-1500..1519: never Spec-Bench), learning into OUT/seed_memory.json from an empty memory; that file,
#    with the device, dtype and how it was made, becomes leap/data/search_memory/SmolLM2-135M-Instruct.json
#    (skip with PRIOR=keep to evaluate the prior already shipped).
# 2. Spec-Bench, 39 first turns, 128 new tokens, T = 0 (and T = 1 with TEMPS="0 1"), one run, whole calls on one clock:
#    plain decoding, lowbit fixed at its defaults, the search from an empty memory (leap-drafters) and from the shipped
#    prior (leap-drafters-prior, memory=prior: in memory only, learning over the run). The records'
#    search_memory_at_start says which memory each started from.
# Usage: bash benchmarks/search_prior.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash benchmarks/search_prior.sh OUT_DIR}"
mkdir -p "$out"
prior=leap/data/search_memory/SmolLM2-135M-Instruct.json
if [ "${PRIOR:-build}" != keep ]; then
  python -c "from leap.heads.prompts import write_prompt_file; write_prompt_file('$out/seed_prompts.jsonl', 1500, 20)"
  rm -f "$out/seed_memory.json"
  leap bench --methods ar,leap-drafters --method-arg "leap-drafters:memory=$out/seed_memory.json" \
      --prompts "$out/seed_prompts.jsonl" --num-prompts 20 --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 \
      --quiet --out "$out/seed_run"
  mkdir -p "$(dirname "$prior")"
  python - "$out/seed_memory.json" "$prior" "$out" <<'PY'
import json, sys
from leap.core.runtime.provenance import git_commit
memory = json.load(open(sys.argv[1]))
json.dump({"model": "SmolLM2-135M-Instruct", "device_type": "cpu", "dtype": "float32",
           "made_by": f"bash benchmarks/search_prior.sh {sys.argv[3]} (leap-drafters, T = 0, 128 new tokens, "
                      "20 seed prompts seed-1500..1519 of leap.heads.prompts; never Spec-Bench)",
           "commit": git_commit(), "options": memory["options"]}, open(sys.argv[2], "w"), indent=1)
PY
  python tools/stamp_prior.py "$prior"  # today's drafter fingerprints: a later leap forgets what changed
fi
for temp in ${TEMPS:-0}; do
  leap bench --methods ar,lowbit,leap-drafters,leap-drafters-prior=leap-drafters \
      --method-arg "leap-drafters-prior:memory=prior" --num-prompts 3 --first-turn-only \
      --max-new-tokens 128 --temperature "$temp" --threads 2 --seed 0 --quiet --out "$out/t${temp}_128"
  leap report "$out/t${temp}_128"
  leap report "$out/t${temp}_128" --baseline lowbit
done
