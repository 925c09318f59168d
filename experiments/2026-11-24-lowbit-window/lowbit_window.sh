#!/usr/bin/env bash
# The low-bit self-draft's context window (lowbit window=W, leap/core/drafters/lowbit.py): the draft takes in only
# the prompt's last W tokens (then follows everything generated), so a long prompt costs llama.cpp less to take
# in, and the draft sees less of it. lowbit with the whole prompt against W = 128 and 256, Spec-Bench first turns
# (one per category: rag and summarization have 660-770-token prompts, the others 40-210), 128 new tokens, T = 0,
# float32, 2 threads. An option measured here, not a tuned default (Spec-Bench is evaluation text).
# Usage: bash experiments/2026-11-24-lowbit-window/lowbit_window.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-24-lowbit-window/lowbit_window.sh OUT_DIR}"
leap bench --methods ar,lowbit,lowbit-w128=lowbit,lowbit-w256=lowbit --method-arg lowbit-w128:window=128 \
    --method-arg lowbit-w256:window=256 --num-prompts 1 --first-turn-only --max-new-tokens 128 --temperature 0 \
    --threads 2 --seed 0 --quiet --out "$out/t0_128"
leap report "$out/t0_128"
