"""docs/figures/batch_speedup.png: throughput over batched plain decoding against the batch size B, with the 95%
t-intervals over batches, from the records of ``bash experiments/2026-11-25-batch/batch.sh`` (issue 37). Needs matplotlib (not a
dependency of leap).

Usage: python experiments/2026-11-25-batch-plot/batch_plot.py OUT.png B=DIR [B=DIR ...]   e.g. 2=docs/data/batch/b2 4=docs/data/batch_v2/b4
"""

from __future__ import annotations

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from leap.bench.records import read_records  # noqa: E402
from leap.bench.report import summarise  # noqa: E402


def main() -> None:
    out, runs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    series: dict[str, list[tuple[int, float, float, float]]] = {}
    for size, folder in runs:
        for row in summarise(read_records(folder)):
            if row.category == "overall" and row.method != "ar":
                series.setdefault(row.method, []).append((int(size), row.speedup, row.speedup_ci_low,
                                                          row.speedup_ci_high))
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, (method, points) in enumerate(sorted(series.items())):
        points.sort()
        xs = [p[0] * (1 + 0.03 * (k - 1.5)) for p in points]  # a little apart, so the intervals do not overlap
        ys = [p[1] for p in points]
        err = [[p[1] - p[2] for p in points], [p[3] - p[1] for p in points]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=method)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({int(s) for s, _ in runs}), [str(s) for s in sorted({int(s) for s, _ in runs})])
    ax.set_xlabel("batch size B")
    ax.set_ylabel("throughput / batched plain decoding")
    ax.set_title("SmolLM2-135M, float32, 2 CPU threads, T = 0, 128 tokens")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
