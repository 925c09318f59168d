"""The ablation against the default over every cell and start of a run of ``ablation.sh``: per batch, the default's
throughput (new tokens over wall time: at T = 1 the rows' lengths differ between methods) over the ablation's (``leap-drafters`` against ``leap-drafters-c16``, ``leap-drafters-prior`` against
``leap-drafters-prior-c16``: above 1, the default was faster), per cell and start, and pooled over all of them - the
geometric mean with a 95% t interval over batches (the cells' batches are independent draws of the same machine's
noise; the two starts share batches, so the pooled interval is a little narrow).

Reads the records only. Usage: python experiments/2026-12-02-cap16/pooled.py [--suffix S] docs/data/cap16-ee75a1c/*
(``--suffix``: the ablation's names are the default's with S appended, ``-c16`` unless told; another experiment's
ablation, e.g. ``--suffix -carried`` for ``experiments/2026-12-03-batch-bar``).
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict

from scipy.stats import t

DEFAULTS = ("leap-drafters", "leap-drafters-prior")


def interval(logs: list[float]) -> str:
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return f"{math.exp(mean):.2f} [{math.exp(mean - half):.2f}, {math.exp(mean + half):.2f}] over {n} batches"


def main(folders: list[str], suffix: str = "-c16") -> None:
    pooled: list[float] = []
    for folder in folders:
        walls: dict[str, dict[str, float]] = defaultdict(dict)
        for line in open(f"{folder}/records.jsonl"):
            r = json.loads(line)
            if r.get("kind") == "answer":
                walls[r["question_id"]][r["method"]] = r["new_tokens"] / r["wall_time_s"]
        for default, ablation in ((m, m + suffix) for m in DEFAULTS):
            logs = [math.log(w[default] / w[ablation]) for w in walls.values() if default in w and ablation in w]
            pooled += logs
            print(f"{folder}: {default} over {ablation}: {interval(logs)}")
    print(f"pooled: {interval(pooled)}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--suffix"]:
        main(args[2:], args[1])
    else:
        main(args)
