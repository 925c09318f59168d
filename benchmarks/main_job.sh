#!/usr/bin/env bash
# The README's main job on its own prompt, as records the README's figures are recomputed from: plain decoding,
# the default search (leap-drafters, memory=prior: it starts from the prior leap ships for the model, as a first
# `leap generate` does on a machine whose search memory is empty, and learns from the untimed warm-up pass and the
# runs before; leap-drafters-cold: no memory, every request searches from scratch), lowbit fixed at its defaults and
# lowbit on its torch-int8 runner, three interleaved timed runs each, 128 new tokens, T = 0 and T = 1 (seed 0),
# float32, 2 threads, whole calls timed. One prompt: no interval over prompts (leap report prints the pooled ratio
# alone). `bash experiments/2026-11-26-main-job-generate/main_job_generate.sh` runs the main job itself (`leap generate --compare`, --json).
# Usage: bash benchmarks/main_job.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash benchmarks/main_job.sh OUT_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
for t in 0 1; do
    leap bench --methods ar,leap-drafters,leap-drafters-cold=leap-drafters,lowbit,lowbit-int8=lowbit \
        --method-arg leap-drafters:memory=prior --method-arg leap-drafters-cold:memory=off --method-arg lowbit-int8:backend=torch-int8 \
        --prompts "$here/main_job_prompt.jsonl" --runs 3 --max-new-tokens 128 --temperature "$t" --threads 2 \
        --seed 0 --quiet --out "$out/t$t"
    leap report "$out/t$t"
done
