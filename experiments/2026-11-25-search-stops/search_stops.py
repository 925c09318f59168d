"""Issue 34: where a search loses to a fixed method, by how each request's search ended (the records'
``search_stop``: ``carried`` an earlier choice unsearched, ``memory``-guided trials, ``done``, ``converged``...).

For each stop kind: the number of requests and the mean per-prompt ratio of the search's speed (new tokens per
second of the whole call) to the baseline method's on the same prompt. Reads a ``leap bench`` records file.

    python experiments/2026-11-25-search-stops/search_stops.py docs/data/lowbit_dense/t1_128 [--method leap-drafters] [--baseline lowbit]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="a leap bench output folder (or its records.jsonl)")
    parser.add_argument("--method", default="leap-drafters")
    parser.add_argument("--baseline", default="lowbit")
    args = parser.parse_args()
    path = Path(args.records)
    path = path / "records.jsonl" if path.is_dir() else path
    runs: dict[tuple, dict] = defaultdict(dict)
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") == "answer" and r.get("status") == "ok":
            runs[(r["question_id"], r["turn"], r["temperature"], r["run"])][r["method"]] = r
    by_stop: dict[str, list[float]] = defaultdict(list)
    for methods in runs.values():
        if args.method in methods and args.baseline in methods:
            s, b = methods[args.method], methods[args.baseline]
            by_stop[str(s.get("search_stop"))].append((s["new_tokens"] / s["wall_time_s"]) /
                                                      (b["new_tokens"] / b["wall_time_s"]))
    for stop, ratios in sorted(by_stop.items(), key=lambda kv: -len(kv[1])):
        print(f"{stop:>10}: {len(ratios):3d} requests, mean per-prompt ratio to {args.baseline} "
              f"{sum(ratios) / len(ratios):.3f}")


if __name__ == "__main__":
    main()
