"""Absolute speed from bench records: each method's generated tokens over its summed whole-call wall time.

Issue 35 asks for absolute tokens/s next to the ratios: a ratio to plain decoding falls when plain decoding gets
faster, while every method may have got faster too. Reads one or more ``records.jsonl`` files (``leap bench --out``);
prints one line per file and method.

    python experiments/2026-11-26-tokens-per-second/tokens_per_second.py docs/data/stock_linears/t0_128/records.jsonl [...]
"""

from __future__ import annotations

import json
import sys


def tokens_per_second(path: str) -> dict[str, tuple[int, float]]:
    """``{method: (tokens, seconds)}`` over the records' successful answers."""
    totals: dict[str, list] = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") == "answer" and r.get("status") == "ok":
                t = totals.setdefault(r["method"], [0, 0.0])
                t[0] += r["new_tokens"]
                t[1] += r["wall_time_s"]
    return {m: (int(n), float(s)) for m, (n, s) in totals.items()}


def main(paths: list[str]) -> None:
    for path in paths:
        for method, (tokens, seconds) in tokens_per_second(path).items():
            print(f"{path}: {method}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tokens/s")


if __name__ == "__main__":
    main(sys.argv[1:])
