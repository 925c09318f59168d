"""``leap report``: Table 1 / Table 2 with t intervals from a ``leap bench`` folder (:mod:`leap.bench.report`); with
``--regret``, the search against the best fixed choice over several folders (:mod:`leap.bench.regret`).
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    rp = sub.add_parser("report", help="LEAP Table 1 / Table 2 from a `leap bench` folder")
    rp.add_argument("folders", nargs="+", metavar="folder",
                    help="the --out folder of leap bench (or its records.jsonl); several with --regret")
    rp.add_argument("--regret", action="store_true",
                    help="per folder (a condition), the search over the best fixed choice run beside it, paired by "
                         "prompt, and whether one fixed choice is within 5%% of the best everywhere")
    rp.add_argument("--format", choices=["md", "csv"], default="md")
    rp.add_argument("--plot", action="store_true", help="also write speedup_T*.png and early_speedup.png to the folder")
    rp.add_argument("--baseline", default="ar", metavar="METHOD",
                    help="speedups over this method instead of plain decoding (paired by prompt; e.g. lowbit)")
    rp.add_argument("--mixed", action="store_true", help="pool records written by different commits or settings (refused otherwise)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from leap.bench.records import read_records, settings_conflict
    from leap.bench.report import (busy_warning, divergence_note, plot_early_speedup, plot_speedup, summarise,
                                   table1_markdown, table2_markdown, to_csv)

    from leap.core.runtime.provenance import check_single_commit

    if args.regret:
        from leap.bench.regret import regret_markdown, regret_rows

        print(regret_markdown(regret_rows(args.folders)), end="")
        return 0
    if len(args.folders) > 1:
        raise SystemExit("leap: report takes one folder (several only with --regret)")
    args.folder = args.folders[0]
    records = read_records(args.folder)
    commits = check_single_commit(records, mixed=args.mixed)
    conflict = settings_conflict(records)
    if conflict and not args.mixed:
        raise SystemExit(f"leap: these records were run with different settings ({conflict}); a table pools one "
                         "experiment - rerun into a fresh folder, or pass --mixed to pool them anyway")
    if not any(r.get("method") == args.baseline for r in records if r.get("kind") == "answer"):
        raise SystemExit(f"leap: no {args.baseline!r} generations in {args.folder} to take ratios to (--baseline)")
    rows = summarise(records, baseline=args.baseline)
    if not rows:
        raise SystemExit(f"leap: {args.folder} holds no finished generations")
    if args.format == "csv":
        print(to_csv(rows), end="")
    else:
        meta = next((r for r in records if r.get("kind") == "meta"), {})
        machine = meta.get("machine", {})
        prov = meta.get("provenance", {})
        dirty = [c for c in commits if c.endswith("+dirty")]
        if dirty:  # uncommitted changes: the commit alone does not say what code ran
            print(f"WARNING: measured with uncommitted changes ({', '.join(dirty)}); no rerun can reproduce these "
                  "figures exactly - commit, then rerun the benchmark\n")
        if (busy := busy_warning(records)):
            print(busy)
        print(f"model {meta.get('model', '?')}; {machine.get('device', '?')} {machine.get('dtype', '')}, "
              f"{machine.get('torch_threads', '?')} threads, {machine.get('processor', '')} ({machine.get('platform', '')}); "
              f"commit {', '.join(commits)}; torch {prov.get('torch', '?')}, transformers "
              f"{prov.get('transformers', '?')}; {prov.get('date', meta.get('time', '?'))}\n")
        if args.baseline != "ar":
            print(f"Speedups below are over `{args.baseline}`, not plain decoding (paired by prompt)\n")
        print("Table 1\n")
        print(table1_markdown(rows))
        print("Table 2 (ablations)\n")
        print(table2_markdown(rows))
        if (note := divergence_note(records)):
            print(note)
    if args.plot:
        folder = Path(args.folder)
        folder = folder if folder.is_dir() else folder.parent
        paths = plot_speedup(rows, folder)
        early = plot_early_speedup([r for r in records if r.get("kind") == "answer"], folder)
        print("wrote " + ", ".join(str(p) for p in [*paths, early] if p), file=sys.stderr)
    return 0
