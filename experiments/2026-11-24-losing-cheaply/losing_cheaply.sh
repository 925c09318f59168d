#!/usr/bin/env bash
# Issue 19, "losing cheaply": LEAP's end-to-end cost over plain decoding on prompts where no layer
# configuration pays (every prompt on SmolLM2-135M on a CPU), at 64 and at 512 new tokens, with the
# search's loss budget (SearchSettings.loss_budget, default 0.03) and without it (--loss-budget 0).
# Usage: bash experiments/2026-11-24-losing-cheaply/losing_cheaply.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-24-losing-cheaply/losing_cheaply.sh OUT_DIR}"
common=(--num-prompts 1 --first-turn-only --temperature 0 --threads 2 --seed 0 --quiet
        --methods ar,leap,leap-unbudgeted=leap --method-arg leap-unbudgeted:loss_budget=0)
leap bench "${common[@]}" --max-new-tokens 64 --out "$out/t64"
leap bench "${common[@]}" --max-new-tokens 512 --categories writing,coding,math,translation,summarization,qa \
    --out "$out/t512"
leap report "$out/t64"
leap report "$out/t512"
