"""How well the calibrated cost model predicts measured step speedups (issue: costs calibrated per machine).

For each prompt (one per category, first turns, chat template, greedy), LEAP's MCTS searches online
with the *measured* reward for ``--budget`` real steps (no give-up, so it visits many
configurations). For every search step, the measured speedup ``committed * t_base / step time`` is set
beside the cost model's prediction ``committed / Calibration.step_cost(...)`` from the calibration of
this model on this machine (``leap calibrate``; measured at the start of the run, or read from its
cache). Per configuration (its steps pooled: tokens over time, tokens over predicted cost) the
relative error is ``|predicted - measured| / measured``. Appends JSONL; prints a summary.

    python experiments/2026-11-22-cost-model-error/cost_model_error.py --prompts 5 --budget 40 --out docs/data/cost_model_error.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

import torch
from tqdm import tqdm

from leap.core.runtime.provenance import provenance
from leap.core import SelfSpecDecoder, load_model
from leap.core.decoding.calibrate import calibration_for
from leap.data import load_prompts, pick_per_category
from leap.redundancy.analysis import prompt_ids
from leap.search.factory import agent_factory
from leap.search.reward import CostModelSpeedup
from leap.search.runner import OnlineSearch, SearchSettings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=5, help="prompts (one per category, in file order)")
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--refresh", action="store_true", help="calibrate again instead of reading the cache")
    ap.add_argument("--out", default="results/cost_model_error.jsonl")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model("smollm2")
    costs = calibration_for(model, refresh=args.refresh)
    predict = CostModelSpeedup(costs)
    rows = pick_per_category(load_prompts(), 1)[: args.prompts]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"kind": "meta", "provenance": provenance(model), "calibration": costs.to_dict(),
              "budget": args.budget, "max_new_tokens": args.max_new_tokens}]
    # per (prompt, configuration): committed tokens, step seconds, sum of t_base, predicted cost, steps
    per_config: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0])
    for row in tqdm(rows, desc="cost model vs measured"):
        runner = OnlineSearch(SelfSpecDecoder(model, None, costs=costs), agent_factory("leap", model.num_layers, seed=0),
                              SearchSettings(budget=args.budget, give_up=0, min_speedup=float("inf")))
        res = runner.generate(prompt_ids(model, row), max_new_tokens=args.max_new_tokens)
        steps = res.generation.steps
        search_steps = [s for s in steps if s.config is not None][: args.budget]
        for s in search_steps:
            measured = s.committed * res.t_base_s / s.time_s
            predicted = predict(s, model.num_layers)
            lines.append({"kind": "step", "category": row["category"], "config": s.config, "drafted": s.drafted,
                          "committed": s.committed, "measured": measured, "predicted": predicted,
                          "t_base_s": res.t_base_s, "time_s": s.time_s})
            acc = per_config[f"{row['category']}|{s.config}"]
            acc[0] += s.committed
            acc[1] += s.time_s
            acc[2] += res.t_base_s
            acc[3] += predict.predicted_cost(s)
            acc[4] += 1
        plain = [s.time_s for s in steps if s.config is None]
        lines.append({"kind": "plain", "category": row["category"], "t_base_s": res.t_base_s,
                      "calibrated_step_s": costs.step_s, "plain_step_median_s": statistics.median(plain) if plain else None})
    errors = []
    for key, (tokens, seconds, base_sum, cost, count) in per_config.items():
        measured = tokens * (base_sum / count) / seconds  # pooled over the configuration's steps
        predicted = tokens / cost
        errors.append(abs(predicted - measured) / measured)
        lines.append({"kind": "config", "key": key, "steps": count, "measured": measured, "predicted": predicted,
                      "error": errors[-1]})
    step_errors = [abs(x["predicted"] - x["measured"]) / x["measured"] for x in lines if x["kind"] == "step"]
    summary = {"kind": "summary", "configurations": len(errors), "steps": len(step_errors),
               "config_error_median": statistics.median(errors), "config_error_mean": statistics.mean(errors),
               "config_within_10pct": sum(e <= 0.10 for e in errors) / len(errors),
               "step_error_median": statistics.median(step_errors),
               "step_within_10pct": sum(e <= 0.10 for e in step_errors) / len(step_errors)}
    lines.append(summary)
    with out.open("a") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    print(json.dumps(summary, indent=1))



if __name__ == "__main__":
    main()
