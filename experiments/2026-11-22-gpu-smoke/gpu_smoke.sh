#!/usr/bin/env bash
# The GPU checks of docs/gpu.md, in one call on a GPU machine (see docs/gpu.md for how it was run).
# Needs: torch with CUDA; transformers (>= 5.23), gymnasium and gguf as wheels in .whl/ where the machine lacks them
# (docs/gpu.md says how to fetch them). Writes to ${OUT:-results/gpu}: gpu.txt (versions, the CUDA tests' output,
# each run's log) and one JSON report per `leap smoke` run - five files, within the device tool's eight.
set -u
OUT="${OUT:-results/gpu}"; mkdir -p "$OUT"
LOG="$OUT/gpu.txt"
source "$(dirname "$0")/../../tools/gpu_env.sh"
git rev-parse HEAD 2>/dev/null | tee -a "$LOG"
git status --short 2>/dev/null | head -20 | tee -a "$LOG"
echo "== the CUDA tests: pytest -m gpu" | tee -a "$LOG"
timeout "${GPU_TEST_S:-120}" python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tail -15 | tee -a "$LOG"
run() {  # name, seconds, args...
  local name=$1 seconds=$2; shift 2
  echo "== $name: leap smoke $* (limit ${seconds} s)" | tee -a "$LOG"
  local t0=$SECONDS
  timeout "$seconds" python3 -m leap smoke "$@" --json > "$OUT/$name.json" 2> /tmp/smoke.err
  echo "exit $? after $((SECONDS - t0)) s" | tee -a "$LOG"; tail -5 /tmp/smoke.err | tee -a "$LOG"
  python3 - "$OUT/$name.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("no report:", e); sys.exit()
print({k: r.get(k) for k in ("device_name", "dtype", "identical", "identity_rate", "peak_memory_gib", "step_ms", "build_s")})
print("paths", r["paths"])
print("tok/s", {k: round(v, 1) for k, v in r["tokens_per_s"].items()})
print("batch rows identical", r.get("batch_rows_identical"))
print("c(k)", r.get("verify_curve")); print("draft cost", r.get("draft_cost")); print("divergence", r.get("divergence"))
for name, tb in (r.get("tracebacks") or {}).items():
    print("--", name, tb[-1500:])
PY
}
run tiny_cuda_fp32 "${TINY_S:-90}" --device cuda --preset tiny --dtype float32
run llama3_8b_cuda_bf16 "${BF16_S:-210}" --device cuda --preset llama3-8b --dtype bfloat16 --max-new-tokens 64
run llama3_8b_cuda_fp32 "${FP32_S:-150}" --device cuda --preset llama3-8b --dtype float32 --max-new-tokens 32
