"""Per-prompt milliseconds a token of each method in a ``leap bench`` records folder: the median over prompts of the
whole call's wall time over its new tokens, and of its decode phase alone; the first prompt listed apart (it carries
what a method's first timed call pays: hf-static's recompilation when its static cache grows).

    python experiments/2026-11-27-gpu-graphs/ms_per_token.py docs/data/gpu_h200/graphs/real
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def main(folder: str) -> None:
    by: dict[str, list[dict]] = defaultdict(list)
    for line in (Path(folder) / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "answer" and record.get("status") == "ok":
            by[record["method"]].append(record)
    print("| method | prompts | first prompt ms/token | median ms/token (whole call) | median ms/token (decode) |")
    print("|---|---|---|---|---|")
    for method, records in by.items():
        whole = [1000 * r["wall_time_s"] / r["new_tokens"] for r in records]
        decode = [1000 * r["decode_s"] / r["new_tokens"] for r in records]
        phase = f"{statistics.median(decode):.2f}" if any(decode) else "-"  # hf-static reports no phases
        print(f"| {method} | {len(records)} | {whole[0]:.1f} | {statistics.median(whole):.2f} | {phase} |")


if __name__ == "__main__":
    main(sys.argv[1])
