"""Search agents on the default model, per Spec-Bench category (issue: search agents). Measures.

For each prompt (one or more per category, chat template, greedy, float32), in one process and
interleaved per prompt: plain decoding, then every method searching online (each timed by one wall
clock around the whole call, search and probes included) (budget 40 real steps,
then the best configuration fixed, or plain decoding if nothing reached a mean speedup of 1.0).
Records tokens/s, speedup over the plain run of the same prompt, mean accepted length M, search
iterations, whether the agent converged, the fixed configuration, search overhead (agent time outside
decoding steps) and token identity with plain decoding. Appends JSONL as it goes; prints Markdown.

    python experiments/2026-11-22-search-bench/search_bench.py --per-category 1 --max-new-tokens 128 --reward measured
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from leap.core import SelfSpecDecoder, load_model
from leap.core.runtime.device import timed_call
from leap.data import load_prompts, pick_per_category
from leap.redundancy.analysis import prompt_ids
from leap.search.factory import agent_factory
from leap.search.runner import OnlineSearch, SearchSettings

METHODS = {
    "leap": ("leap", {}),
    "leap band 0.75-0.95": ("leap", {"ratio_band": [0.75, 0.95], "ratio_target": 0.85, "max_ratio": 1.0}),
    "zone-rule (w/o MCTS)": ("zone-rule", {}),
    "ucb": ("ucb", {}),
    "bayes": ("bayes", {}),
    "random": ("random", {}),
    "swift": ("swift", {}),
    "clasp": ("clasp", {}),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-category", type=int, default=1)
    ap.add_argument("--categories", default=None)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--reward", choices=["measured", "cost"], default="measured")
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="results/search_bench.jsonl")
    ap.add_argument("--summarise", default=None)
    args = ap.parse_args()
    if args.summarise:
        print(summarise([json.loads(x) for x in Path(args.summarise).read_text().splitlines()]))
        return
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model = load_model("smollm2")
    rows = pick_per_category(load_prompts(), args.per_category, args.categories.split(",") if args.categories else None)
    names = args.methods.split(",")
    factories = {n: agent_factory(METHODS[n][0], model.num_layers, seed=0, agent_kwargs=METHODS[n][1]) for n in names}
    decoder = SelfSpecDecoder(model, None)
    records = []

    def add(**rec):
        records.append(rec)
        with out.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    add(kind="meta", reward=args.reward, budget=args.budget, max_new_tokens=args.max_new_tokens,
        prompts=len(rows), time=time.strftime("%Y-%m-%d %H:%M:%S"), threads=args.threads)
    bar = tqdm(total=len(rows) * (len(names) + 1), desc="search bench")
    for row in rows:
        ids = prompt_ids(model, row)
        plain, seconds = timed_call(lambda: decoder.generate(ids, max_new_tokens=args.max_new_tokens), model.device)
        plain_tps = plain.new_tokens / seconds
        add(kind="run", category=row["category"], method="plain", tokens_per_s=plain_tps, speedup=1.0,
            mean_accepted=plain.mean_accepted)
        bar.update(1)
        for name in names:
            runner = OnlineSearch(decoder, factories[name], SearchSettings(budget=args.budget, reward=args.reward))
            try:
                res, seconds = timed_call(lambda: runner.generate(ids, max_new_tokens=args.max_new_tokens),
                                          model.device)  # the whole call: space building, search, probes, decoding
            except Exception as err:  # a failing method is recorded, the run goes on
                add(kind="run", category=row["category"], method=name, error=repr(err))
                bar.update(1)
                continue
            g = res.generation
            tps = g.new_tokens / seconds
            add(kind="run", category=row["category"], method=name, tokens_per_s=tps,
                speedup=tps / plain_tps, mean_accepted=g.mean_accepted, wall_time_s=seconds,
                iterations=res.iterations, converged=res.converged, fixed=res.fixed_config,
                overhead_frac=res.search_overhead_s / seconds, identical=g.token_ids == plain.token_ids)
            bar.set_postfix(method=name, speedup=f"{tps / plain_tps:.2f}")
            bar.update(1)
    bar.close()
    print(summarise(records))


def _mean_cell(values: list[float]) -> str:
    return f"{statistics.mean(values):.2f}x" if values else "-"


def summarise(records: list[dict]) -> str:
    meta = next(r for r in records if r["kind"] == "meta")
    runs = [r for r in records if r["kind"] == "run" and r["method"] != "plain" and "error" not in r]
    plain = [r for r in records if r["kind"] == "run" and r["method"] == "plain"]
    plain_tps = statistics.mean(r["tokens_per_s"] for r in plain)
    cats = list(dict.fromkeys(r["category"] for r in runs))
    methods = list(dict.fromkeys(r["method"] for r in runs))
    lines = [f"reward: {meta['reward']}, budget {meta['budget']}, {meta['prompts']} prompts, "
             f"{meta['max_new_tokens']} new tokens; plain decoding {plain_tps:.1f} tok/s on average "
             f"({min(r['tokens_per_s'] for r in plain):.1f}..{max(r['tokens_per_s'] for r in plain):.1f} per prompt)\n",
             "Per category: the method's tokens/s over the plain run of the same prompt. overall (Spec-Bench): "
             "mean tokens/s over mean plain tokens/s; median: median per-prompt ratio.\n",
             "| method | " + " | ".join(cats) + " | overall | median | M | iterations | converged | overhead | identical |",
             "|---|" + "---|" * (len(cats) + 7)]
    for m in methods:
        rs = [r for r in runs if r["method"] == m]
        cells = [_mean_cell([r["speedup"] for r in rs if r["category"] == c]) for c in cats]
        fixed_plain = sum(r["fixed"] is None for r in rs)
        overall = statistics.mean(r["tokens_per_s"] for r in rs) / plain_tps
        lines.append(
            f"| {m} | " + " | ".join(cells) + f" | {overall:.2f}x | {statistics.median(r['speedup'] for r in rs):.2f}x | "
            f"{statistics.mean(r['mean_accepted'] for r in rs):.2f} | {statistics.mean(r['iterations'] for r in rs):.1f} | "
            f"{sum(r['converged'] for r in rs)}/{len(rs)} (plain fixed {fixed_plain}) | "
            f"{100 * statistics.mean(r['overhead_frac'] for r in rs):.1f}% | {sum(r['identical'] for r in rs)}/{len(rs)} |")
    errors = [r for r in records if "error" in r]
    if errors:
        lines.append(f"\n{len(errors)} failed runs: " + "; ".join(f"{r['method']}/{r['category']}: {r['error']}" for r in errors))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
