"""Where a single-request cell's search gains or loses against a fixed method: per request, the search's speedup over
the fixed method (its wall time over the search's, the same prompt in the same run), split by the memory's prompt-length
condition (short: fewer than 512 prompt tokens, long: the rest, :meth:`leap.search.memory.SearchMemory.condition`) and
by what the request did (``searched``: it ran trials; ``carried``: it ran none, an earlier request's choice carried),
as geometric means with the requests' count and the worst request (each request's figure where a group holds four
or fewer). A batch cell's batches split by whether the search drafted in them at all (``drafted``) or decoded every
step plainly (``wholly plain``: the same work as plain decoding's, so their ratio is the host's noise).
``--trials``: instead, every search request in order (each ``leap-drafters*`` method, each run of the main-job cell)
with its prompt's tokens, its trials (option: reward) and what it kept and carried.

Reads the records only. Usage:
python experiments/2026-12-01-regret-runs/split.py [--base lowbit] docs/data/regret-amd-b0635b7/b1-t0 ...
python experiments/2026-12-01-regret-runs/split.py --base ar docs/data/regret-amd-b0635b7/b8-t0
python experiments/2026-12-01-regret-runs/split.py --trials docs/data/regret-amd-b0635b7/main-job
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict

SEARCHES = ("leap-drafters", "leap-drafters-prior")
LONG_PROMPT = 512  # SearchMemory's default long_prompt


def split(folder: str, base: str = "lowbit") -> dict[str, dict[str, list[float]]]:
    """search method -> "short searched" etc. -> the per-request speedups over ``base``."""
    walls: dict[str, dict[str, dict]] = defaultdict(dict)
    for line in open(f"{folder}/records.jsonl"):
        record = json.loads(line)
        if record.get("kind") == "answer":
            walls[str(record["question_id"])][record["method"]] = record
    out: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in SEARCHES}
    for methods in walls.values():
        if base not in methods:
            continue
        for search in SEARCHES:
            if search not in methods:
                continue
            record = methods[search]
            if record.get("batch_size", 1) > 1:
                group = "drafted" if any(record.get("batch_caps") or ()) else "wholly plain"
            else:
                length = "long" if record["prompt_tokens"] >= LONG_PROMPT else "short"
                group = f"{length} {'searched' if record.get('trial_configs') else 'carried'}"
            out[search][group].append(methods[base]["wall_time_s"] / record["wall_time_s"])
    return out


def trials(folder: str) -> None:
    """Print every search request of ``folder`` in order: its trials, the option it kept and its carry verdict."""
    for line in open(f"{folder}/records.jsonl"):
        record = json.loads(line)
        if record.get("kind") != "answer" or not record["method"].startswith("leap-drafters"):
            continue
        tried = ", ".join(f"{config}: {reward:.2f}" for config, reward in
                          zip(record.get("trial_configs") or (), record.get("trial_rewards") or ()))
        print(f"{record['method']} run {record['run']} {record['question_id']} ({record['prompt_tokens']} tokens): "
              f"[{tried}] kept {record.get('config')}; {record.get('search_carry')}")


def main(argv: list[str]) -> None:
    base = "lowbit"
    if argv[:1] == ["--trials"]:
        for folder in argv[1:]:
            trials(folder)
        return
    if argv[:1] == ["--base"]:
        base, argv = argv[1], argv[2:]
    for folder in argv:
        for search, groups in split(folder, base).items():
            cells = [f"{group}: {math.exp(sum(map(math.log, v)) / len(v)):.2f} over {len(v)} ("
                     + (", ".join(f"{x:.2f}" for x in v) if len(v) <= 4 else f"worst {min(v):.2f}") + ")"
                     for group, v in sorted(groups.items()) if v]
            print(f"{folder} {search} over {base}: " + "; ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
