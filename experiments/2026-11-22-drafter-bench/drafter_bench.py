"""Model-free drafters against plain decoding and transformers' own prompt lookup (the peer).

For each prompt (one per Spec-Bench category by default; chat template, greedy, float32), in one
process and interleaved per prompt: leap's plain decoding, leap with each drafter, and transformers'
``model.generate(prompt_lookup_num_tokens=N)`` on the same weights (timed the same way, wall clock
around the call). Appends JSONL as it goes and prints speedup per category (tokens/s over the plain
run of the same prompt), overall (mean tokens/s over mean plain tokens/s), M and token identity.

    python experiments/2026-11-22-drafter-bench/drafter_bench.py --per-category 1 --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from tqdm import tqdm

from leap.core import SelfSpecDecoder, load_model
from leap.core.runtime.device import timed_call
from leap.data import load_prompts, pick_per_category
from leap.redundancy.analysis import prompt_ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-category", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--num-tokens", type=int, default=10, help="prompt lookup: tokens copied per match")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="results/drafter_bench.jsonl")
    ap.add_argument("--summarise", default=None)
    args = ap.parse_args()
    if args.summarise:
        print(summarise([json.loads(x) for x in Path(args.summarise).read_text().splitlines()]))
        return
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    records = []

    def add(**rec):
        records.append(rec)
        with out.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    model = load_model("smollm2")
    rows = pick_per_category(load_prompts(), args.per_category)
    add(kind="meta", max_new_tokens=args.max_new_tokens, num_tokens=args.num_tokens, prompts=len(rows),
        time=time.strftime("%Y-%m-%d %H:%M:%S"))
    plain_decoder = SelfSpecDecoder(model, None)
    pld = SelfSpecDecoder(model, None, drafter="prompt-lookup", drafter_kwargs={"num_tokens": args.num_tokens})
    for row in tqdm(rows, desc="drafter bench"):
        ids = prompt_ids(model, row)
        plain, dt = timed_call(lambda: plain_decoder.generate(ids, max_new_tokens=args.max_new_tokens))
        add(kind="run", category=row["category"], method="plain", tokens_per_s=plain.new_tokens / dt, mean_accepted=1.0,
            identical=True)
        res, dt = timed_call(lambda: pld.generate(ids, max_new_tokens=args.max_new_tokens))
        add(kind="run", category=row["category"], method="leap prompt-lookup", tokens_per_s=res.new_tokens / dt,
            mean_accepted=res.mean_accepted, identical=res.token_ids == plain.token_ids)
        with torch.inference_mode():
            gen, dt = timed_call(lambda: model.hf_model.generate(
                torch.tensor([ids]), max_new_tokens=args.max_new_tokens, do_sample=False,
                prompt_lookup_num_tokens=args.num_tokens))
        hf_ids = gen[0, len(ids):].tolist()
        add(kind="run", category=row["category"], method="transformers prompt-lookup (peer)",
            tokens_per_s=len(hf_ids) / dt, mean_accepted=None, identical=hf_ids == plain.token_ids)
    print(summarise(records))


def summarise(records: list[dict]) -> str:
    meta = next(r for r in records if r["kind"] == "meta")
    runs = [r for r in records if r["kind"] == "run"]
    plain = {r["category"]: r["tokens_per_s"] for r in runs if r["method"] == "plain"}
    cats = list(plain)
    lines = [f"{meta['prompts']} prompts, {meta['max_new_tokens']} new tokens, prompt lookup copies up to "
             f"{meta['num_tokens']} tokens; plain decoding {statistics.mean(plain.values()):.1f} tok/s on average\n",
             "| method | " + " | ".join(cats) + " | overall | slower than plain | M | identical |",
             "|---|" + "---|" * (len(cats) + 4)]
    for m in dict.fromkeys(r["method"] for r in runs):
        rs = {r["category"]: r for r in runs if r["method"] == m}
        ratios = [rs[c]["tokens_per_s"] / plain[c] for c in cats if c in rs]
        overall = statistics.mean(r["tokens_per_s"] for r in rs.values()) / statistics.mean(plain.values())
        ms = [r["mean_accepted"] for r in rs.values() if r["mean_accepted"] is not None]
        lines.append(f"| {m} | " + " | ".join(f"{x:.2f}x" for x in ratios) + f" | {overall:.2f}x | "
                     f"{sum(x < 1 for x in ratios)}/{len(ratios)} | {statistics.mean(ms):.2f} | "
                     f"{sum(r['identical'] for r in rs.values())}/{len(rs)} |" if ms else
                     f"| {m} | " + " | ".join(f"{x:.2f}x" for x in ratios) + f" | {overall:.2f}x | "
                     f"{sum(x < 1 for x in ratios)}/{len(ratios)} | - | {sum(r['identical'] for r in rs.values())}/{len(rs)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
