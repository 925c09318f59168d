#!/usr/bin/env bash
# Issue 19, the feature layer k: draft heads on the top layer (EAGLE, k = L = 30: `eagle`, chain and OPT-Tree
# cut) against exit heads on two layers k < L (Kangaroo/DVI: the layers below k draft, a trained low-rank exit
# reads them: `exit-head`, k = 10 and 20, leap/heads/exit_head.py), each on its own and with LEAP's search
# choosing the layer configuration below k (and between the two k) per prompt (`leap-drafters` over the two
# exit heads). Spec-Bench first turns (one per category), float32, 2 threads; T = 0 and T = 1 at 128 new tokens.
# The heads are the shipped ones (leap/data/heads/): an empty $LEAP_CACHE is used so that no
# locally trained head stands in for them.
# Usage: bash experiments/2026-11-24-heads-layers/heads_layers.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-24-heads-layers/heads_layers.sh OUT_DIR}"
mkdir -p "$out"
export LEAP_CACHE="$out/cache"
trap 'rm -rf "$out/cache"' EXIT  # the float weights cached there are not records
args=(--method-arg eagle-tree:shape=opt --method-arg exit10:layer=10 --method-arg exit20:layer=20
      --method-arg "exit-search:drafters=exit-head:layer=10;exit-head:layer=20")
leap bench --methods ar,eagle,eagle-tree=eagle,exit10=exit-head,exit20=exit-head,exit-search=leap-drafters "${args[@]}" \
    --num-prompts 1 --first-turn-only --max-new-tokens 128 --temperature 0 --threads 2 --seed 0 --quiet \
    --out "$out/t0_128"
leap bench --methods ar,eagle,exit10=exit-head,exit20=exit-head --method-arg exit10:layer=10 \
    --method-arg exit20:layer=20 --num-prompts 1 --first-turn-only --max-new-tokens 128 --temperature 1 \
    --threads 2 --seed 0 --quiet --out "$out/t1_128"
leap report "$out/t0_128"
leap report "$out/t1_128"
