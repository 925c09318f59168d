"""The drafter search at batch level where nothing pays, on leap's own seed prompts 300+ (never Spec-Bench): B rows a
batch, three batches (``--batches``), 128 new tokens, T = 0, after one warm-up batch of two prompts (8 tokens) per method, each method's
whole call timed; throughput over plain batched decoding on the same batches. Methods: plain, the search
(leap-drafters' batchable options, caps 0/4/16 or ``--caps``) without and with the loss budget (0.03, as leap-drafters runs it), the
search with the budget over the options the shipped prior ranks (``memory=prior``: leap/data/search_memory, made on
other seed prompts, 1500+), and lowbit-auto (one drafter, the bandit over caps 0/2/4/8: the fixed choice the search has to match);
``-ladder`` variants of the budgeted methods open a drafter's longer caps by the ladder alone (``screen=False``: the ablation
of the cost-model screen, since b7d040d); ``-plain-bar`` variants screen them against plain decoding, not the best arm
(``screen="plain"``: the bar's ablation); ``-no-switching``: every arm explores at every step, a drafter's setup
mid-batch not counted (``switching=False``); ``-as-before``: all three batch-bandit changes of 2026-11-27 off (the bar at
plain, no switching rule, a drafter's first step in a batch measured); ``-first-step``: that rule alone (a drafter's first
step in a batch unmeasured, ``first_step_setup=True``). ``batch-search*``: :class:`~leap.search.batch.BatchSearch` as
``leap-drafters`` runs it (caps 0/2/4/8/16, loss budget 0.03, an empty memory), ``-prune``: every drafter but the best
measured retired after each batch (``prune=1.0``), ``-first-step`` as above, ``-switch``: a drafter's first step after a step it did not
draft unmeasured too (``first_step_setup="switch"``). Every method forgets what its warm-up measured. ``--methods`` picks some (plain always runs).
Usage: python experiments/2026-11-26-batch-search-seed/batch_search_seed.py [B] [--batches N] [--caps 0,4,16] [--methods a,b] [--out FILE.json]"""

from __future__ import annotations

import argparse
import json
import time

from leap.core import load_model
from leap.core.decoding.batch import BatchDecoder
from leap.core.runtime.provenance import provenance
from leap.heads.prompts import seed_prompts
from leap.search.drafter_space import DEFAULT_DRAFTERS, batch_options
from leap.search.batch import BatchSearch
from leap.search.memory import SearchMemory, memory_for


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("b", type=int, nargs="?", default=8)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--caps", default="0,4,16", help="the search's caps (lowbit-auto keeps 0, 2, 4, 8)")
    ap.add_argument("--methods", default="", help="comma-separated subset of the methods below (plain always runs)")
    ap.add_argument("--out")
    args = ap.parse_args()
    b, model = args.b, load_model()
    caps = tuple(int(c) for c in args.caps.split(","))
    options = batch_options(DEFAULT_DRAFTERS, model)
    specs = [(o.name, o.kwargs) for o in options]
    ranked = [(o.name, o.kwargs) for o in memory_for(model, persist=False, prior=True).rank_drafters(options)]
    prompts = [model.encode(p, chat=True) for p in seed_prompts(400)[300:300 + args.batches * b]]
    methods = {"plain": BatchDecoder(model, None),
               "search": BatchDecoder(model, specs, num_tokens="auto", caps=caps),
               "search-loss-budget": BatchDecoder(model, specs, num_tokens="auto", caps=caps, loss_budget=0.03),
               "search-prior": BatchDecoder(model, ranked, num_tokens="auto", caps=caps, loss_budget=0.03),
               "lowbit-auto": BatchDecoder(model, "lowbit", num_tokens="auto"),
               "search-loss-budget-ladder": BatchDecoder(model, specs, num_tokens="auto", caps=caps, loss_budget=0.03,
                                                         screen=False),
               "search-prior-ladder": BatchDecoder(model, ranked, num_tokens="auto", caps=caps, loss_budget=0.03,
                                                   screen=False),
               "lowbit-auto-ladder": BatchDecoder(model, "lowbit", num_tokens="auto", screen=False),
               "search-loss-budget-plain-bar": BatchDecoder(model, specs, num_tokens="auto", caps=caps,
                                                            loss_budget=0.03, screen="plain"),
               "search-prior-plain-bar": BatchDecoder(model, ranked, num_tokens="auto", caps=caps, loss_budget=0.03,
                                                      screen="plain"),
               "lowbit-auto-plain-bar": BatchDecoder(model, "lowbit", num_tokens="auto", screen="plain"),
               "search-loss-budget-no-switching": BatchDecoder(model, specs, num_tokens="auto", caps=caps,
                                                               loss_budget=0.03, switching=False),
               "search-loss-budget-as-before": BatchDecoder(model, specs, num_tokens="auto", caps=caps,
                                                            loss_budget=0.03, screen="plain", switching=False,
                                                            first_step_setup=False),
               "search-loss-budget-first-step": BatchDecoder(model, specs, num_tokens="auto", caps=caps,
                                                             loss_budget=0.03, first_step_setup=True)}
    searches = {"batch-search": {}, "batch-search-prune": {"prune": 1.0},
                "batch-search-first-step": {"first_step_setup": True},
                "batch-search-prune-first-step": {"prune": 1.0, "first_step_setup": True},
                "batch-search-switch": {"first_step_setup": "switch"},
                "batch-search-prune-switch": {"prune": 1.0, "first_step_setup": "switch"}}
    for name, flags in searches.items():  # BatchSearch as leap-drafters runs it, from an empty memory
        methods[name] = BatchSearch(model, DEFAULT_DRAFTERS, memory=SearchMemory(None), caps=(0, 2, 4, 8, 16),
                                    loss_budget=0.03, **{"prune": None, **flags})
    if args.methods:
        chosen = {"plain", *args.methods.split(",")}
        unknown = chosen - set(methods)
        if unknown:
            raise SystemExit(f"unknown methods {sorted(unknown)}; known: {', '.join(methods)}")
        methods = {n: d for n, d in methods.items() if n in chosen}
    for decoder in methods.values():
        start = decoder.memory.copy() if isinstance(decoder, BatchSearch) else None
        decoder.generate(prompts[:2], max_new_tokens=8)
        decoder.forget()  # what the warm-up measured is not what the run starts from (as leap bench, since 2026-11-27)
        if start is not None:
            decoder.memory.adopt(start)
    record = {"batch_size": b, "prompts": "seed_prompts 300+", "prior_ranked": [name for name, _ in ranked], "caps": caps, "methods": list(methods), "provenance": provenance(model), "batches": []}
    totals = {name: [0.0, 0] for name in methods}
    for i in range(args.batches):
        for name, decoder in methods.items():
            t0 = time.perf_counter()
            out = decoder.generate(prompts[i * b:(i + 1) * b], max_new_tokens=128)
            seconds = time.perf_counter() - t0
            totals[name][0] += seconds
            totals[name][1] += out.new_tokens
            drafted = sum(1 for c in out.caps if c) if name != "plain" else 0
            labels = decoder.labels if isinstance(decoder, BatchSearch) else []
            record["batches"].append({"batch": i, "method": name, "seconds": seconds, "tokens": out.new_tokens,
                                      "steps": out.steps, "drafted_steps": drafted,
                                      "arms": [[labels[d] if labels else d, c] for d, c in zip(out.drafters, out.caps)],
                                      "retired": [labels[d] for d in sorted(decoder.decoder.retired)] if labels else []})
            print(f"batch {i} {name}: {seconds:.2f} s, {out.steps} steps ({drafted} drafted)")
    base = totals["plain"][1] / totals["plain"][0]
    record["throughput_over_plain"] = {n: (t / s) / base for n, (s, t) in totals.items()}
    for name, ratio in record["throughput_over_plain"].items():
        print(f"{name}: {ratio:.3f}x plain batched decoding")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
