"""Pools experiments/2026-11-26-search-budget/search_budget.sh's runs (one per seed): for each agent and wall-clock budget, the speedup over
plain decoding and over fixed ``lowbit``, per (prompt, seed) pair in the same run, with 95% t intervals over the pairs
(``leap.bench.stats.speedup_interval``, its per-prompt mean ratio), and the trials the agent ran in its budget. Writes
a Markdown table and a plot of speedup against budget per agent.

    python experiments/2026-11-26-search-budget-plot/search_budget_plot.py docs/data/search_budget/seed* --out docs/data/search_budget/summary.md \\
        --plot docs/figures/search_budget.png
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

from leap.bench.stats import speedup_interval


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--plot")
    args = ap.parse_args()
    per: dict[str, dict[tuple, dict]] = defaultdict(dict)  # method -> (run, prompt) -> record
    commits = set()
    for run in args.runs:
        for line in open(Path(run) / "records.jsonl"):
            r = json.loads(line)
            if r.get("kind") == "meta":
                commits.add(r.get("provenance", {}).get("commit"))
            if r.get("kind") != "answer" or r.get("status", "ok") != "ok" or r.get("warmup"):
                continue
            per[r["method"]][(run, r["question_id"])] = r
    rows = []
    for method in sorted(per):
        m = re.match(r"(.+)-s(\d+)$", method)
        if not m:
            continue
        agent, budget = m.group(1), float(m.group(2)[0] + "." + m.group(2)[1:]) if m.group(2).startswith("0") \
            else float(m.group(2))
        cells = {}
        for base in ("ar", "lowbit"):
            pairs = [(r["new_tokens"], r["wall_time_s"], per[base][k]["new_tokens"], per[base][k]["wall_time_s"])
                     for k, r in per[method].items() if k in per[base]]
            cells[base] = speedup_interval(pairs)
        trials = [r.get("search_iterations", 0) for r in per[method].values()]
        rows.append((agent, budget, cells, sum(trials) / len(trials), len(trials)))
    lines = [f"runs: {', '.join(args.runs)}; commits: {', '.join(sorted(c for c in commits if c))}", "",
             "| agent | budget (s) | over plain, mean per (prompt, seed) [95% CI] | over lowbit [95% CI] | trials | pairs |",
             "|---|---|---|---|---|---|"]
    for agent, budget, cells, trials, n in sorted(rows):
        a, b = cells["ar"], cells["lowbit"]
        lines.append(f"| {agent} | {budget:g} | {a.mean_ratio:.2f}x [{a.mean_ratio_low:.2f}, {a.mean_ratio_high:.2f}] | "
                     f"{b.mean_ratio:.2f}x [{b.mean_ratio_low:.2f}, {b.mean_ratio_high:.2f}] | {trials:.1f} | {n} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for agent in sorted({r[0] for r in rows}):
            pts = sorted((b, c["lowbit"]) for a, b, c, *_ in rows if a == agent)
            xs = [p[0] for p in pts]
            ax.errorbar(xs, [p[1].mean_ratio for p in pts],
                        yerr=[[p[1].mean_ratio - p[1].mean_ratio_low for p in pts],
                              [p[1].mean_ratio_high - p[1].mean_ratio for p in pts]], marker="o", capsize=3, label=agent)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel("search budget per request (s, whole: space and set-up included)")
        ax.set_ylabel("speedup over fixed lowbit")
        ax.set_title("Agents on the drafter space at equal wall-clock budgets")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)


if __name__ == "__main__":
    main()
