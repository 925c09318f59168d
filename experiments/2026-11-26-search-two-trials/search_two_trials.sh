#!/usr/bin/env bash
# Issue 34: a request that ends inside its search carries its best option only after two trials of it there (one
# lucky few-step trial carried losers on in docs/data/xeon_rebaseline and docs/data/lowbit_native). The same run as
# benchmarks/machine_rebaseline.sh (ar, lowbit, leap-drafters with an empty memory; 39 first turns, 128 tokens,
# T = 0 and 1), at the commit with that rule. Usage: bash experiments/2026-11-26-search-two-trials/search_two_trials.sh OUT_DIR [TEMPERATURES]
exec bash benchmarks/machine_rebaseline.sh "$@"
