"""How far a batch cell's clock moves on the same work: the batches a search decoded wholly plainly against `ar`'s
time for the same batch in the same run (reads records, decodes nothing).

A batch a search decoded without one drafting step is plain batched decoding's work, token for token (the same rows,
the same new tokens); its wall time over `ar`'s for that batch is the host's noise between two calls of one run. Per
host and cell: the pairs, their geometric mean (a bias between methods would show here), the spread of their log, and
what that spread means for a cell of N batches - the half-width of the 95% t interval a method doing plain's exact
work would get, and the chance that its point estimate reads below 0.95 (the regret target's bar) by noise alone.

    python experiments/2026-12-07-same-work-noise/same_work_noise.py docs/data/regret-*/b*-t*
    python experiments/2026-12-07-same-work-noise/same_work_noise.py --batches 20 docs/data/regret-amd-*/b8-t0
    python experiments/2026-12-07-same-work-noise/same_work_noise.py --split docs/data/regret-amd-*/b8-t0

``--split``: where a search's time went instead - per search method over the folders given, its first batch (every
drafter tried), its later batches with at least one drafting step and its wholly plain ones, each as the geometric
mean of its wall time over `ar`'s for the same batch (above 1: slower than plain decoding). ``--steps``: a search's
plain steps at eight rows over `ar`'s median step in the same batch, as a batch's first step, right after a drafting
step and after a plain one (a bar measured right after drafting, or at a batch's start, would be off by as much).

The host is read from the folder's name (`regret-amd-...`, `regret-xeon-...`); other folders count as `unnamed`.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from scipy.stats import norm, t


def batches(folder: Path, field: str = "batch_caps") -> dict[tuple, dict[str, dict]]:
    """A folder's batch records that finished and hold ``field``: (batch, run, temperature) -> method -> record."""
    by_batch: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for line in (folder / "records.jsonl").read_text().splitlines():
        record = json.loads(line) if line.strip() else {}
        if record.get("kind") == "answer" and record.get("status") == "ok" and field in record:
            by_batch[(record["question_id"], record.get("run", 0), record["temperature"])][record["method"]] = record
    return by_batch


def same_work_pairs(folder: Path) -> list[float]:
    """log(search's wall / ar's wall) for every batch a method other than ar decoded with no drafting step."""
    out = []
    for methods in batches(folder).values():
        ar = methods.get("ar")
        for name, record in methods.items():
            if ar is None or name == "ar" or any(record["batch_caps"]) or record["new_tokens"] != ar["new_tokens"]:
                continue
            out.append(math.log(record["wall_time_s"] / ar["wall_time_s"]))
    return out


def split(folders: list[Path]) -> None:
    """The ``--split`` table (module docstring)."""
    parts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for folder in folders:
        for (batch, _, _), methods in batches(folder).items():
            ar = methods.get("ar")
            for name, record in methods.items():
                if ar is None or not name.startswith("leap-drafters"):
                    continue
                part = "first batch" if batch == "b0" else "drafted" if any(record["batch_caps"]) else "plain"
                parts[name][part].append(math.log(record["wall_time_s"] / ar["wall_time_s"]))
    for name, by_part in sorted(parts.items()):
        cells = [f"{part} {len(v)} batches at {math.exp(statistics.mean(v)):.3f}"
                 for part in ("first batch", "drafted", "plain") if (v := by_part.get(part))]
        print(f"{name}: " + ", ".join(cells) + " of ar's time")


def steps(folders: list[Path]) -> None:
    """The ``--steps`` table (module docstring)."""
    kinds: dict[str, list[float]] = defaultdict(list)
    for folder in folders:
        for methods in batches(folder, "batch_step_s").values():
            ar = methods.get("ar")
            full = [s for s, rows in zip(ar["batch_step_s"], ar["batch_step_rows"]) if rows == 8] if ar else []
            if len(full) < 5:
                continue
            base = statistics.median(full)
            for name, record in methods.items():
                if not name.startswith("leap-drafters"):
                    continue
                caps = record["batch_caps"]
                for i, (cap, seconds, rows) in enumerate(zip(caps, record["batch_step_s"], record["batch_step_rows"])):
                    if not cap and rows == 8:
                        kind = "first" if i == 0 else "after drafting" if caps[i - 1] else "after plain"
                        kinds[kind].append(math.log(seconds / base))
    for kind in ("first", "after drafting", "after plain"):
        if kinds[kind]:
            print(f"plain step at 8 rows, {kind}: {len(kinds[kind])} steps at {math.exp(statistics.mean(kinds[kind])):.3f} "
                  f"of ar's median step in the batch (geometric mean)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="leap bench output folders of batch cells")
    parser.add_argument("--batches", type=int, default=10, help="the cell's batches (regret.sh: 10; b4-t1: 20)")
    parser.add_argument("--split", action="store_true", help="a search's batches by kind instead (docstring)")
    parser.add_argument("--steps", action="store_true", help="a search's plain steps by place instead (docstring)")
    args = parser.parse_args()
    if args.split or args.steps:
        return (split if args.split else steps)([f for f in args.folders if (f / "records.jsonl").is_file()])
    pooled: dict[tuple[str, str], list[float]] = defaultdict(list)
    for folder in args.folders:
        if not (folder / "records.jsonl").is_file():
            continue
        name = folder.parent.name
        host = "amd" if "-amd-" in name else "xeon" if "-xeon-" in name else "unnamed"
        pooled[(host, folder.name)] += same_work_pairs(folder)
    n = args.batches
    print(f"host     cell    pairs  geo-mean  sd(log)  95% half-width at {n} batches  P(plain's work reads < 0.95)")
    for (host, cell), logs in sorted(pooled.items()):
        if len(logs) < 3:
            continue
        sd = statistics.stdev(logs)
        se = sd / math.sqrt(n)
        half = math.exp(t.ppf(0.975, n - 1) * se) - 1
        below = norm.cdf(math.log(0.95) / se)
        print(f"{host:8} {cell:7} {len(logs):5}  {math.exp(statistics.mean(logs)):8.3f}  {sd:7.3f}  "
              f"{half:29.3f}  {below:.4f}")


if __name__ == "__main__":
    main()
