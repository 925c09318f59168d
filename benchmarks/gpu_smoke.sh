#!/usr/bin/env bash
# The GPU checks of docs/gpu.md, in one call on a GPU machine (see docs/gpu.md for how it was run).
# Needs: torch with CUDA, transformers; gymnasium as wheels in .whl/ where the machine lacks it.
# Writes one JSON report per run to ${OUT:-results/gpu}.
set -u
OUT="${OUT:-results/gpu}"; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/gpu.txt"
git rev-parse HEAD 2>/dev/null | tee -a "$OUT/gpu.txt"
run() {  # name, args...
  local name=$1; shift
  echo "== $name: leap smoke $*"
  timeout 300 python3 -m leap smoke "$@" --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  echo "exit $?"; tail -3 "$OUT/$name.err"
  python3 - "$OUT/$name.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("no report:", e); sys.exit()
print({k: r.get(k) for k in ("device_name", "dtype", "identical", "identity_rate", "peak_memory_gib", "step_ms", "build_s")})
print("paths", r["paths"])
print("tok/s", {k: round(v, 1) for k, v in r["tokens_per_s"].items()})
print("c(k)", r.get("verify_curve")); print("draft cost", r.get("draft_cost")); print("divergence", r.get("divergence"))
PY
}
run tiny_cuda_fp32 --device cuda --preset tiny --dtype float32
run llama3_8b_cuda_bf16 --device cuda --preset llama3-8b --dtype bfloat16 --max-new-tokens 64
run llama3_8b_cuda_fp32 --device cuda --preset llama3-8b --dtype float32 --max-new-tokens 64
