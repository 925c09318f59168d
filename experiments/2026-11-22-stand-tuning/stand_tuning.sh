#!/usr/bin/env bash
# Tune stand's settings at T = 1 on *tuning* prompts only: the last 2 questions of every Spec-Bench
# category (the benchmarks use the first ones; the two sets are disjoint, checked below).
# Usage: bash experiments/2026-11-22-stand-tuning/stand_tuning.sh [OUT]   (about 20 minutes on a 2-core CPU)
set -euo pipefail
out=${1:-results/stand_tuning}
mkdir -p "$out"
python - "$out/prompts.jsonl" <<'PY'
import json, sys
from leap.data import load_prompts
rows = load_prompts()
by_cat = {}
for r in rows:
    by_cat.setdefault(r["category"], []).append(r)
tune = [r for rs in by_cat.values() for r in rs[-2:]]
first = {r["question_id"] for rs in by_cat.values() for r in rs[:3]}
assert not first & {r["question_id"] for r in tune}, "tuning prompts overlap the benchmark's"
with open(sys.argv[1], "w") as f:
    for r in tune:
        f.write(json.dumps(r) + "\n")
PY
leap bench --prompts "$out/prompts.jsonl" --num-prompts 2 --first-turn-only --temperature 1 --max-new-tokens 96 \
  --threads 2 --out "$out" --quiet --resume \
  --methods ar,chain=stand,chain-k16=stand,chain-o4=stand,chain-latest=stand,opt-tv=stand,opt-tv-k16=stand \
  --method-arg chain-k16:top_k=16 --method-arg chain-o4:order=4 --method-arg chain-latest:update=latest \
  --method-arg opt-tv:shape=opt --method-arg opt-tv:tree_verify=traversal \
  --method-arg opt-tv-k16:shape=opt --method-arg opt-tv-k16:tree_verify=traversal --method-arg opt-tv-k16:top_k=16
