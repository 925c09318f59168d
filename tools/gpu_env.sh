# Sourced by the GPU scripts (gpu_smoke.sh, gpu_suite.sh) with LOG set: installs the wheels carried in .whl/ (a GPU
# machine without network access that lacks a dependency; docs/gpu.md lists them), puts this checkout on
# PYTHONPATH, and writes the GPU, torch and transformers versions to $LOG.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
# a wheel staged by an earlier call on the same (warm) machine: tools/gpu_stage.sh
[ -d /tmp/site ] && [ -z "${PYTHONPATH:-}" ] && export PYTHONPATH=/tmp/site
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1 LEAP_CACHE=/tmp/leap_cache
# a `leap` command for scripts that call it (benchmarks/regret.sh): this checkout is on PYTHONPATH, not installed
if ! command -v leap >/dev/null; then
  mkdir -p /tmp/bin && printf '#!/bin/sh\nexec python3 -m leap "$@"\n' > /tmp/bin/leap && chmod +x /tmp/bin/leap
  export PATH="/tmp/bin:$PATH"
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOG"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
  | tee -a "$LOG"
