"""Core engine benchmark on the default model (issue: core decoder). Not a test: it measures.

Sections (all by default):

* ``forward``  - cost of one forward over k = 1, 2, 4, 8, 16 tokens relative to k = 1, with torch's own
  float32 linears and with leap's oneDNN linears (the float32 slow path);
* ``generate`` - on N Spec-Bench prompts of different categories (chat template, greedy): plain
  decoding through leap vs ``model.generate`` on the same weights; for each of three layer-skip
  configurations its draft cost relative to a full forward, and for each draft policy its mean
  accepted length M, speedup over plain decoding in the same run (interleaved per prompt), token
  identity with plain decoding, and leap's per-step overhead; plus the effect of exact-prefix reuse
  and of a restricted draft vocabulary.

Every measurement is appended to ``--out`` (JSONL) as soon as it is taken; a summary is printed as
Markdown at the end. Usage::

    python benchmarks/core_bench.py --prompts 5 --max-new-tokens 128 --out results/core_bench.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from leap.core import LayerConfig, SelfSpecDecoder, load_model
from leap.core.runtime.device import timed_call
from leap.core.modeling.layers import LayerStack

ROOT = Path(__file__).resolve().parents[1]
CATEGORIES = ["translation", "summarization", "qa", "math_reasoning", "writing", "coding", "rag"]
CONFIGS = {
    "skip 5-7": dict(skip=[5, 6, 7]),
    "skip 10,14,18,22": dict(skip=[10, 14, 18, 22]),
    "skip 4,8,..,24": dict(skip=[4, 8, 12, 16, 20, 24]),
}
POLICIES = {
    "fixed k=4": ("fixed", {"k": 4}),
    "confidence 0.8": ("confidence", {"threshold": 0.8}),
    "adaptive-confidence": ("adaptive-confidence", {}),
    "adaedl": ("adaedl", {}),
}


def load_prompts(n: int) -> list[dict]:
    from leap.data import load_prompts as shipped  # the Spec-Bench questions shipped inside leap

    rows = shipped()
    picked, seen = [], set()
    for cat in CATEGORIES:
        for row in rows:
            if row["category"] == cat and cat not in seen:
                picked.append(row)
                seen.add(cat)
                break
    return picked[:n]


def interleaved_medians(fns: dict, rounds: int = 25) -> dict:
    """Median time of each function, measured round-robin so that machine drift hits all alike."""
    for fn in fns.values():
        fn()
    times: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def _prefilled(model, context: int = 300):
    stack = LayerStack(model)
    ids = torch.randint(0, model.vocab_size, (context,), generator=torch.Generator().manual_seed(0)).tolist()
    cache = stack.new_cache()
    with torch.inference_mode():
        stack.run_layers(stack.embed(ids), stack.full_plan, cache, 0)
    return stack, ids, cache


def forward_fns(model, ks=(1, 2, 4, 8, 16), context=300) -> dict[int, object]:
    """Functions running one forward (all layers + head) over k new tokens after ``context`` cached ones."""
    stack, ids, cache = _prefilled(model, context)

    def run(k):
        with torch.inference_mode():
            stack.logits(stack.run_layers(stack.embed(ids[:k]), stack.full_plan, cache, context))
            stack.rollback(cache, context)

    return {k: (lambda k=k: run(k)) for k in ks}


def draft_costs(model, configs: dict[str, LayerConfig], context=300) -> dict[str, float]:
    """Time of one draft token under each config / time of one full single-token forward."""
    from leap.core.modeling.draft_head import DraftHead
    from leap.core.modeling.layers import plan_for

    stack, ids, cache = _prefilled(model, context)
    plans = {name: plan_for([a.passes for a in c.actions]) for name, c in configs.items()}
    plans["full"] = stack.full_plan
    sub = DraftHead.lowest_ids(model.lm_head, 8192)

    def run(plan, head=None):
        with torch.inference_mode():
            stack.logits(stack.run_layers(stack.embed(ids[:1]), plan, cache, context), head)
            stack.rollback(cache, context)

    fns = {name: (lambda p=plan: run(p)) for name, plan in plans.items()}
    fns["full, draft head 8192"] = lambda: run(stack.full_plan, sub)
    t = interleaved_medians(fns)
    return {name: v / t["full"] for name, v in t.items() if name != "full"}


class Recorder:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict] = []

    def add(self, **row) -> None:
        self.rows.append(row)
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")


def section_forward(rec: Recorder) -> None:
    """Both linear paths, every k, measured in the same interleaved rounds."""
    fns = {}
    for fast in (False, True):
        for k, fn in forward_fns(load_model("smollm2", fast_linear=fast)).items():
            fns[(fast, k)] = fn
    t = interleaved_medians(fns, rounds=30)
    for (fast, k), v in t.items():
        rec.add(section="forward", onednn=fast, k=k, ms=1000 * v, ratio=v / t[(fast, 1)], vs_default_k1=v / t[(False, 1)])
    for fast in (False, True):
        print(f"forward onednn={fast}: " + ", ".join(f"k={k} {1000 * v:.1f} ms" for (f, k), v in t.items() if f == fast),
              file=sys.stderr)


def section_draft(rec: Recorder, model) -> None:
    """Draft cost per token of each configuration (and of the restricted draft head), interleaved."""
    configs = {name: LayerConfig.from_sets(model.num_layers, **sets) for name, sets in CONFIGS.items()}
    for name, cost in draft_costs(model, configs).items():
        layers = configs[name].layer_passes if name in configs else model.num_layers
        rec.add(section="draft_cost", config=name, layers=layers, cost=cost)


def section_generate(rec: Recorder, n_prompts: int, max_new: int) -> None:
    model = load_model("smollm2")
    prompts = load_prompts(n_prompts)
    section_draft(rec, model)
    for row in prompts:
        ids = model.encode(row["turns"][0], chat=True)
        cat = row["category"]
        plain, seconds = timed_call(lambda: SelfSpecDecoder(model, None).generate(ids, max_new_tokens=max_new))
        plain_tps = plain.new_tokens / seconds  # one wall clock around the whole call
        rec.add(section="generate", category=cat, method="plain", tokens_per_s=plain_tps,
                new_tokens=plain.new_tokens, steps=len(plain.steps), overhead_s=plain.overhead_s,
                step_time_s=plain.decode_time_s)
        with torch.inference_mode():
            ref, dt = timed_call(lambda: model.hf_model.generate(torch.tensor([ids]), max_new_tokens=max_new,
                                                                 do_sample=False))
        hf_ids = ref[0, len(ids):].tolist()
        rec.add(section="generate", category=cat, method="hf-generate", tokens_per_s=len(hf_ids) / dt,
                identical=hf_ids[: plain.new_tokens] == plain.token_ids)
        for cname, sets in CONFIGS.items():
            config = LayerConfig.from_sets(model.num_layers, **sets)
            for pname, (policy, kwargs) in POLICIES.items():
                out, dt = timed_call(lambda: SelfSpecDecoder(model, config, policy, policy_kwargs=kwargs).generate(
                    ids, max_new_tokens=max_new))
                rec.add(section="generate", category=cat, method="self-spec", config=cname, policy=pname,
                        tokens_per_s=out.new_tokens / dt, speedup=out.new_tokens / dt / plain_tps,
                        mean_accepted=out.mean_accepted, acceptance=out.acceptance_rate,
                        identical=out.token_ids == plain.token_ids, steps=len(out.steps),
                        overhead_s=out.overhead_s, step_time_s=out.decode_time_s,
                        draft_time_s=out.draft_time_s, verify_time_s=out.verify_time_s)
        # exact-prefix reuse and restricted draft vocabulary, on the lightest config
        config = LayerConfig.from_sets(model.num_layers, **CONFIGS["skip 10,14,18,22"])
        for variant, kw in {"no-reuse": {"reuse_prefix": False}, "reuse": {},
                            "reuse+draft-vocab-8192": {"draft_vocab": 8192}}.items():
            out, dt = timed_call(lambda: SelfSpecDecoder(model, config, "confidence", **kw).generate(
                ids, max_new_tokens=max_new))
            rec.add(section="variant", category=cat, variant=variant, tokens_per_s=out.new_tokens / dt,
                    speedup=out.new_tokens / dt / plain_tps, identical=out.token_ids == plain.token_ids,
                    mean_accepted=out.mean_accepted,
                    draft_ms_per_token=1000 * out.draft_time_s / max(1, out.draft_tokens_proposed),
                    verify_ms_per_step=1000 * out.verify_time_s / max(1, len(out.steps)))
        print(f"done {cat}", file=sys.stderr)


def summarise(rows: list[dict]) -> str:
    out = []
    fwd = [r for r in rows if r["section"] == "forward"]
    if fwd:
        out.append("### Forward cost over k tokens (in brackets: relative to the same path's k = 1; "
                   "last row: relative to torch's k = 1)\n\n| linears | " +
                   " | ".join(f"k={r['k']}" for r in fwd if r["onednn"]) + " |\n|---|" + "---|" * len([r for r in fwd if r["onednn"]]))
        for fast in (False, True):
            cells = [f"{r['ms']:.1f} ms ({r['ratio']:.2f}x)" for r in fwd if r["onednn"] == fast]
            out.append(f"| {'oneDNN (leap)' if fast else 'torch default'} | " + " | ".join(cells) + " |")
        out.append("| oneDNN vs torch k=1 | " + " | ".join(f"{r['vs_default_k1']:.2f}x" for r in fwd if r["onednn"]) + " |")
        out.append("")
    dc = [r for r in rows if r["section"] == "draft_cost"]
    if dc:
        out.append("### Draft cost per token relative to a full forward\n\n| config | layers | cost |\n|---|---|---|")
        out += [f"| {r['config']} | {r['layers']} | {r['cost']:.2f} |" for r in dc]
        out.append("")
    gen = [r for r in rows if r["section"] == "generate"]
    if gen:
        plain = [r for r in gen if r["method"] == "plain"]
        hf = [r for r in gen if r["method"] == "hf-generate"]
        tps = statistics.mean(r["tokens_per_s"] for r in plain)
        out.append(f"### Plain decoding\n\nleap plain: {tps:.1f} tok/s (mean over {len(plain)} prompts); "
                   f"`model.generate` on the same weights: {statistics.mean(r['tokens_per_s'] for r in hf):.1f} tok/s; "
                   f"identical tokens on {sum(r['identical'] for r in hf)}/{len(hf)} prompts. "
                   f"leap overhead outside model forwards: "
                   f"{100 * sum(r['overhead_s'] for r in plain) / sum(r['step_time_s'] for r in plain):.1f}% of step time.\n")
        spec = [r for r in gen if r["method"] == "self-spec"]
        out.append("### Self-speculative decoding (speedup = tokens/s over plain decoding in the same run)\n")
        out.append("| config | policy | M | acceptance | speedup (mean) | speedup (min..max) | identical | overhead |")
        out.append("|---|---|---|---|---|---|---|---|")
        for cname in CONFIGS:
            for pname in POLICIES:
                rs = [r for r in spec if r["config"] == cname and r["policy"] == pname]
                if not rs:
                    continue
                sp = [r["speedup"] for r in rs]
                ovh = 100 * sum(r["overhead_s"] for r in rs) / sum(r["step_time_s"] for r in rs)
                out.append(f"| {cname} | {pname} | {statistics.mean(r['mean_accepted'] for r in rs):.2f} | "
                           f"{statistics.mean(r['acceptance'] for r in rs):.0%} | {statistics.mean(sp):.2f}x | "
                           f"{min(sp):.2f}..{max(sp):.2f} | {sum(r['identical'] for r in rs)}/{len(rs)} | {ovh:.1f}% |")
        out.append("")
    var = [r for r in rows if r["section"] == "variant"]
    if var:
        out.append("### Exact-prefix reuse and restricted draft vocabulary (skip 10,14,18,22, confidence)\n")
        out.append("| variant | speedup | draft ms/token | verify ms/step | identical |\n|---|---|---|---|---|")
        for v in dict.fromkeys(r["variant"] for r in var):
            rs = [r for r in var if r["variant"] == v]
            out.append(f"| {v} | {statistics.mean(r['speedup'] for r in rs):.2f}x | "
                       f"{statistics.mean(r['draft_ms_per_token'] for r in rs):.1f} | "
                       f"{statistics.mean(r['verify_ms_per_step'] for r in rs):.1f} | "
                       f"{sum(r['identical'] for r in rs)}/{len(rs)} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--section", choices=["forward", "draft", "generate", "all"], default="all")
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="results/core_bench.jsonl")
    ap.add_argument("--summarise", default=None, help="only print the summary of an existing JSONL file")
    args = ap.parse_args()
    if args.summarise:
        print(summarise([json.loads(line) for line in Path(args.summarise).read_text().splitlines()]))
        return
    torch.set_num_threads(args.threads)
    rec = Recorder(Path(args.out))
    rec.add(section="meta", threads=args.threads, torch=torch.__version__, prompts=args.prompts,
            max_new_tokens=args.max_new_tokens, time=time.strftime("%Y-%m-%d %H:%M:%S"))
    if args.section in ("forward", "all"):
        section_forward(rec)
    if args.section == "draft":
        section_draft(rec, load_model("smollm2"))
    if args.section in ("generate", "all"):
        section_generate(rec, args.prompts, args.max_new_tokens)
    print(summarise(rec.rows))


if __name__ == "__main__":
    main()
