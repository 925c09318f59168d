#!/usr/bin/env bash
# Issue 53's GPU cells on one lent GPU machine, as the third of tools/gpu_stage.sh's calls (the model's wheel staged by
# the first two, leap/data/heads in the tree): joins and installs the wheel, then runs benchmarks/regret.sh's
# gpu-b4-t0 and gpu-b1-t0 cells (about 3 minutes each on an H200, plus about a minute of calibration the first time),
# each under its own time limit, and prints the regret table and the B = 1 cell over hf-static.
# Writes ${OUT:-results/gpu_regret}/: log.txt, gpu-b4-t0/records.jsonl, gpu-b1-t0/records.jsonl.
#   B4_S, B1_S: each cell's limit in seconds (default 240 and 300); CELLS: which cells (default both).
set -u
OUT="${OUT:-results/gpu_regret}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/../tools/gpu_stage.sh" join 2>&1 | tee -a "$LOG"
source "$here/../tools/gpu_env.sh"
for cell in ${CELLS:-gpu-b4-t0 gpu-b1-t0}; do
  limit="${B1_S:-300}"; [ "$cell" = gpu-b4-t0 ] && limit="${B4_S:-240}"
  t0=$SECONDS
  CELLS="$cell" DEVICE=cuda timeout "$limit" bash "$here/regret.sh" "$OUT" 2>&1 | tail -12 | tee -a "$LOG"
  echo "$cell took $((SECONDS - t0)) s (limit $limit s)" | tee -a "$LOG"
done
folders=(); for cell in ${CELLS:-gpu-b4-t0 gpu-b1-t0}; do [ -f "$OUT/$cell/records.jsonl" ] && folders+=("$OUT/$cell"); done
[ ${#folders[@]} -gt 0 ] && python3 -m leap report "${folders[@]}" --regret 2>&1 | tee -a "$LOG"
[ -f "$OUT/gpu-b1-t0/records.jsonl" ] && python3 -m leap report "$OUT/gpu-b1-t0" --baseline hf-static 2>&1 | tee -a "$LOG"
exit 0
