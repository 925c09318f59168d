#!/usr/bin/env bash
# The search against the best fixed choice, condition by condition: the table `leap report DIR... --regret` prints
# and docs/results.md keeps. Every cell runs plain decoding, the fixed options and the search in one `leap bench` run,
# interleaved per prompt (per batch at B > 1), each method's whole call on one clock, 128 new tokens, seed 0. The search
# runs twice: from an empty memory (`leap-drafters`) and from the prior leap ships for the model (`leap-drafters-prior`,
# learnt on leap's own seed prompts, never Spec-Bench) - no cell starts from a memory that saw its own prompts.
#
# Cells (CELLS='...', default: every CPU cell; the GPU cells run where DEVICE=cuda):
#   b1-t0, b1-t1    one request at a time, T = 0 and 1: Spec-Bench's first turns, three per category (39)
#   b4-t0           batches of 4 of the same 39 prompts (10 batches), T = 0
#   b8-t0           batches of 8 of six first turns per category (78 prompts, 10 batches: with the 39 prompts' 5
#                   batches the interval was 0.3 wide on the Xeon, wider than the 5% it is to decide), T = 0
#   b4-t1           batches of 4 of the b8-t0 cell's 78 prompts (20 batches: over 10 the interval was about 0.15 wide
#                   on the Xeon, a batch's rows ending at other lengths once it drafts at T = 1), T = 1
#   long-t0         the longest prompts: Spec-Bench's summarization and rag first turns, LONG_N each (default 10:
#                   with five each the interval was 0.12-0.26 wide, wider than the 5% it is to decide), T = 0
#   main-job        the README's main-job prompt, 8 runs, every request a new machine's first (memory=first: a new
#                   search from the shipped prior), the memory's favourite first (the default) and not
#   gpu-b1-t0, gpu-b4-t0   on CUDA (bfloat16, the CUDA-graph engine), with transformers' static-cache generate
#                   (`hf-static`) and the model-free drafters beside the search (from an empty memory only: the
#                   shipped prior is the CPU's, float32)
# ARGS='...' adds leap bench arguments to every cell: an ablation is a flag, e.g.
#   ARGS='--method-arg leap-drafters:batch_judge_all_in=true --method-arg leap-drafters-prior:batch_judge_all_in=true'
# Usage: [CELLS='b4-t0 b8-t0'] [DEVICE=cpu|cuda] [ARGS='...'] [LONG_N=10] bash benchmarks/regret.sh OUT_DIR
# On the project's 2-core CPUs the whole CPU set took 40 minutes (AMD EPYC, at 2775806) and 67 (Intel Xeon, at 459c126,
# its first calibration included);
# the four single-request cells alone 41 on another AMD EPYC host (a4d3b97, its first calibration included).
# The ablation of the prior's rescaling: ARGS='--method-arg leap-drafters-prior:memory_rescale=false'.
# On one H200 a GPU cell took about 3 minutes, plus about a minute of calibration the first time (tools/gpu_stage.sh
# carries the model there).
set -euo pipefail
out="${1:?usage: [CELLS='...'] [DEVICE=cpu|cuda] bash benchmarks/regret.sh OUT_DIR}"
device="${DEVICE:-cpu}"
if [ "$device" = cuda ]; then default_cells="gpu-b1-t0 gpu-b4-t0"; else default_cells="main-job b1-t0 b1-t1 b4-t0 b8-t0 b4-t1 long-t0"; fi
here="$(cd "$(dirname "$0")" && pwd)"
search=(leap-drafters leap-drafters-prior=leap-drafters)
prior=(--method-arg leap-drafters-prior:memory=prior)
# shellcheck disable=SC2206
common=(--max-new-tokens 128 --seed 0 --quiet --first-turn-only ${ARGS:-})  # ARGS split on spaces, as typed
cpu=(--device cpu --threads 2)
auto() { for m in "$@"; do printf -- '--method-arg %s:batch_cap=auto ' "$m"; done; }
done_cells=()
for cell in ${CELLS:-$default_cells}; do
    case "$cell" in
        b1-t0|b1-t1)
            leap bench --methods "ar,lowbit,suffix,$(IFS=,; echo "${search[*]}")" "${prior[@]}" --num-prompts 3 \
                --temperature "${cell#b1-t}" "${cpu[@]}" "${common[@]}" --out "$out/$cell" ;;
        b4-t0|b8-t0|b4-t1)
            b="${cell%%-*}"; b="${b#b}"; t="${cell#*-t}"; n=3; if [ "$cell" != b4-t0 ]; then n=6; fi
            # shellcheck disable=SC2046
            leap bench --batch-size "$b" --methods "ar,lowbit-auto=lowbit,suffix-auto=suffix,$(IFS=,; echo "${search[*]}")" \
                $(auto lowbit-auto suffix-auto) "${prior[@]}" --num-prompts "$n" --temperature "$t" "${cpu[@]}" \
                "${common[@]}" --out "$out/$cell" ;;
        long-t0)
            leap bench --methods "ar,lowbit,suffix,$(IFS=,; echo "${search[*]}")" "${prior[@]}" \
                --categories summarization,rag --num-prompts "${LONG_N:-10}" --temperature 0 "${cpu[@]}" "${common[@]}" --out "$out/$cell" ;;
        main-job)
            leap bench --methods ar,lowbit,leap-drafters-first=leap-drafters,leap-drafters-first-agent=leap-drafters \
                --method-arg leap-drafters-first:memory=first --method-arg leap-drafters-first-agent:memory=first \
                --method-arg leap-drafters-first-agent:favourite_first=false --prompts "$here/main_job_prompt.jsonl" \
                --runs 8 --temperature 0 "${cpu[@]}" "${common[@]}" --out "$out/$cell" ;;
        gpu-b1-t0)  # the search from an empty memory only: leap ships no prior for CUDA (its run would repeat this one)
            leap bench --methods "ar,hf-static,suffix,prompt-lookup,leap,leap-drafters" \
                --device cuda --dtype bfloat16 --num-prompts 1 --temperature 0 "${common[@]}" --out "$out/$cell" ;;
        gpu-b4-t0)
            # shellcheck disable=SC2046
            leap bench --batch-size 4 --methods "ar,hf-static,suffix-auto=suffix,prompt-lookup-auto=prompt-lookup,leap-drafters" \
                $(auto suffix-auto prompt-lookup-auto) --device cuda --dtype bfloat16 --num-prompts 2 \
                --temperature 0 "${common[@]}" --out "$out/$cell" ;;
        *) echo "regret.sh: unknown cell $cell (main-job b1-t0 b1-t1 b4-t0 b8-t0 b4-t1 long-t0 gpu-b1-t0 gpu-b4-t0)" >&2; exit 2 ;;
    esac
    done_cells+=("$out/$cell")
    leap report "${done_cells[@]}" --regret  # the table so far, after every cell
done
