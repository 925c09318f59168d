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
# 3. PRIOR=batches: the prior's batch set alone (SearchMemory's "batches": what a drafter's best arm measured over
#    plain batched decoding), then stop: leap-drafters at B = 4 on 40 further seed prompts (seed-1520..1559, ten
#    batches), learning into OUT/seed_batch_memory.json from an empty memory; its "batches" join the shipped prior,
#    whose single-request options stay as they are. benchmarks/regret.sh's batch cells evaluate it on Spec-Bench.
# 4. PRIOR=long: the prior's long-prompt set alone (SearchMemory's "long_prompts": prompts of 512 tokens and more), then
#    stop: leap-drafters at B = 1 on 20 of leap's long seed prompts (leap.heads.prompts.long_seed_prompts: tasks over
#    leap's own module docstrings, 550-1100 tokens; never Spec-Bench), learning into OUT/seed_long_memory.json from an
#    empty memory; its long set joins the shipped prior, the other sets staying as they are. benchmarks/regret.sh's
#    long-t0 cell evaluates it on Spec-Bench.
# 5. PRIOR=sampled: the prior's sampled set alone (SearchMemory's "sampled": single requests at T > 0), then stop:
#    leap-drafters at T = 1 on the same 20 seed prompts as step 1 (seed-1500..1519), learning into
#    OUT/seed_sampled_memory.json from an empty memory; its sampled set joins the shipped prior. benchmarks/regret.sh's
#    b1-t1 cell evaluates it on Spec-Bench.
# 6. PRIOR=sampled-batches: the prior's sampled batch set alone (SearchMemory's "sampled_batches": batches at T > 0),
#    then stop: leap-drafters at B = 4, T = 1 on the same 40 seed prompts as step 3 (seed-1520..1559), learning into
#    OUT/seed_sampled_batch_memory.json from an empty memory; its set joins the shipped prior. benchmarks/regret.sh's
#    b4-t1 cell evaluates it on Spec-Bench.
# 7. PRIOR=sampled-long: the prior's sampled long-prompt set alone (SearchMemory's "sampled_long_prompts": single
#    requests of 512 tokens and more at T > 0), then stop: leap-drafters at T = 1 on the same 20 long seed prompts as
#    step 4 (seed-long-0..19), learning into OUT/seed_sampled_long_memory.json from an empty memory; its set joins the
#    shipped prior. benchmarks/regret.sh's b1-t1 cell (its summarization and rag prompts) evaluates it on Spec-Bench.
# Usage: [PRIOR=build|keep|batches|long|sampled|sampled-batches|sampled-long] bash benchmarks/search_prior.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash benchmarks/search_prior.sh OUT_DIR}"
mkdir -p "$out"
prior=leap/data/search_memory/SmolLM2-135M-Instruct.json
# join_set FIELD RUN_NAME DESCRIPTION BENCH_ARGS...: leap-drafters from an empty memory on OUT/RUN_NAME_prompts.jsonl
# at T = $TEMP (default 0), learning into OUT/RUN_NAME_memory.json; its set FIELD joins the shipped prior (the other
# sets stay), stamped
join_set() {
  local field="$1" name="$2" what="$3"
  shift 3
  rm -f "$out/${name}_memory.json"
  leap bench --methods ar,leap-drafters --method-arg "leap-drafters:memory=$out/${name}_memory.json" \
      --prompts "$out/${name}_prompts.jsonl" "$@" --max-new-tokens 128 --temperature "${TEMP:-0}" --threads 2 --seed 0 --quiet \
      --out "$out/${name}_run"
  python - "$out/${name}_memory.json" "$prior" "$field" "PRIOR=$PRIOR bash benchmarks/search_prior.sh $out ($what)" <<'PY'
import json, sys
from leap.core.runtime.provenance import git_commit
cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
memory, data, field = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
data[field] = memory[field]
data[f"{field}_made_by"] = f"{sys.argv[4][:-1]}; never Spec-Bench; on {cpu})"
data[f"{field}_commit"] = git_commit()
json.dump(data, open(sys.argv[2], "w"), indent=1)
PY
  python tools/stamp_prior.py "$prior"
  leap report "$out/${name}_run"
}
if [ "${PRIOR:-build}" = batches ]; then
  python -m leap.heads.prompts "$out/seed_batch_prompts.jsonl" 1520 40
  join_set batches seed_batch "leap-drafters, B = 4, T = 0, 128 new tokens, 40 seed prompts seed-1520..1559 of leap.heads.prompts" \
      --batch-size 4 --num-prompts 40
  exit 0
fi
if [ "${PRIOR:-build}" = long ]; then
  python -m leap.heads.prompts "$out/seed_long_prompts.jsonl" 0 20 long
  join_set long_prompts seed_long "leap-drafters, B = 1, T = 0, 128 new tokens, 20 long seed prompts seed-long-0..19 of leap.heads.prompts" \
      --num-prompts 20
  exit 0
fi
if [ "${PRIOR:-build}" = sampled ]; then
  python -m leap.heads.prompts "$out/seed_sampled_prompts.jsonl" 1500 20
  TEMP=1 join_set sampled seed_sampled "leap-drafters, B = 1, T = 1, 128 new tokens, 20 seed prompts seed-1500..1519 of leap.heads.prompts" \
      --num-prompts 20
  exit 0
fi
if [ "${PRIOR:-build}" = sampled-long ]; then
  python -m leap.heads.prompts "$out/seed_sampled_long_prompts.jsonl" 0 20 long
  TEMP=1 join_set sampled_long_prompts seed_sampled_long "leap-drafters, B = 1, T = 1, 128 new tokens, 20 long seed prompts seed-long-0..19 of leap.heads.prompts" \
      --num-prompts 20
  exit 0
fi
if [ "${PRIOR:-build}" = sampled-batches ]; then
  python -m leap.heads.prompts "$out/seed_sampled_batch_prompts.jsonl" 1520 40
  TEMP=1 join_set sampled_batches seed_sampled_batch "leap-drafters, B = 4, T = 1, 128 new tokens, 40 seed prompts seed-1520..1559 of leap.heads.prompts" \
      --batch-size 4 --num-prompts 40
  exit 0
fi
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
