#!/usr/bin/env bash
# Issue 35's absolute target: leap's plain decoding (`ar`: leap's decode loop on the float32 linears load_model measured
# faster on this machine - oneDNN-packed or torch's own, docs/core.md)
# against transformers' own `generate` on the same weights, as transformers builds the model (`hf-ar-stock`:
# nn.Linear, MKL's sgemm) and on leap's linears (`hf-ar`: the loop's share alone). Spec-Bench first turns, three per
# category (39), 128 new tokens, T = 0, float32, 2 threads, one run, each whole call on one clock; greedy, so every
# method's tokens must equal ar's (leap report's identical column).
# `leap report OUT_DIR --baseline hf-ar-stock` gives ar over stock generate, paired by prompt, with its interval.
# Usage: bash benchmarks/plain_vs_generate.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash benchmarks/plain_vs_generate.sh OUT_DIR}"
leap bench --methods ar,hf-ar,hf-ar-stock=hf-ar --method-arg hf-ar-stock:linears=stock --num-prompts 3 \
    --first-turn-only --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet --out "$out"
leap report "$out"
leap report "$out" --baseline hf-ar-stock
# absolute speed: every method's tokens over its summed wall time, from the records
python3 - "$out/records.jsonl" <<'PY'
import json, sys
totals = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "answer" and r.get("status") == "ok":
        t = totals.setdefault(r["method"], [0, 0.0])
        t[0] += r["new_tokens"]
        t[1] += r["wall_time_s"]
for method, (tokens, seconds) in totals.items():
    print(f"{method}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tokens/s")
PY
