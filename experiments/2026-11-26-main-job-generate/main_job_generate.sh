#!/usr/bin/env bash
# The README's main job as a newcomer runs it: `leap generate PROMPT --compare` on the README's prompt (warm-up, then
# three timed rounds alternating with plain decoding; each round's search starts from the memory as it was before the
# command), with no method flag (the default search over drafters, from the shipped prior: an empty search memory)
# and with `--drafter lowbit`, each with --json into OUT. LEAP_CACHE is a fresh folder holding what ~/.cache/leap holds but its search
# memory (calibration, GGUF and weight caches) (first-use costs are the warm-up's), so no earlier search memory is read.
# Usage: bash experiments/2026-11-26-main-job-generate/main_job_generate.sh OUT_DIR
set -euo pipefail
out="${1:?usage: bash experiments/2026-11-26-main-job-generate/main_job_generate.sh OUT_DIR}"
mkdir -p "$out"
cache="$(mktemp -d)"
for sub in "$HOME"/.cache/leap/*; do  # all but the search memory (and setup.sh's wheels)
  case "$(basename "$sub")" in search_memory|wheels) ;; *) cp -r "$sub" "$cache/" ;; esac
done
prompt="Explain speculative decoding in two sentences."
LEAP_CACHE="$cache" leap generate "$prompt" --compare --json ${SEARCH_ARGS:-} > "$out/search.json"  # e.g. --favourite-first
LEAP_CACHE="$cache" leap generate "$prompt" --drafter lowbit --compare --json > "$out/lowbit.json"
python - "$out" <<'PY'
import json, sys
for name in ("search", "lowbit"):
    r = json.load(open(f"{sys.argv[1]}/{name}.json"))
    print(f"{name}: {r['speedup']:.2f}x ({r['speedup_low']:.2f}-{r['speedup_high']:.2f}) identical={r['identical_to_plain']} "
          f"new_tokens={len(r.get('token_ids', []))} config={r.get('fixed_config') or r.get('config')} commit={r.get('provenance', {}).get('commit')}")
PY
rm -rf "$cache"
