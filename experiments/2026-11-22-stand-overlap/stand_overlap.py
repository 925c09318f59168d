"""Why trees do not pay under sampling here: how close stand's draft distribution q is to the target p.

For the first draft token of every step of stand's chains at T = 1 it records ``sum_x min(p(x), q(x))``,
the probability that speculative sampling accepts a token drawn from q (Leviathan et al., 2023), next
to stand's own running estimate per match order (the one its sampled tree shapes use). Tuning prompts
only: the last question of every Spec-Bench category (the benchmarks use the first ones).

    python experiments/2026-11-22-stand-overlap/stand_overlap.py [--prompts 13] [--max-new-tokens 96] [--out docs/data/stand_overlap.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

import leap.core.decoding.decoder as decoder_module
from leap.core.runtime.provenance import provenance
from leap.core import SelfSpecDecoder, load_model
from leap.core.drafters import make_drafter
from leap.data import load_prompts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--prompts", type=int, default=13)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    by_cat: dict[str, list[dict]] = {}
    for row in load_prompts():
        by_cat.setdefault(row["category"], []).append(row)
    prompts = [rows[-1] for rows in by_cat.values()][: args.prompts]

    overlaps: list[float] = []
    rule = decoder_module.speculative_accept

    def recording(draft, q, p, generator):
        if draft:
            overlaps.append(torch.minimum(p[0], q[0]).sum().item())
        return rule(draft, q, p, generator)

    decoder_module.speculative_accept = recording
    stand = make_drafter("stand")
    decoder = SelfSpecDecoder(model, None, drafter=stand)
    new = steps = 0
    try:
        for i, row in enumerate(prompts):
            out = decoder.generate(row["turns"][0], max_new_tokens=args.max_new_tokens, temperature=1.0, seed=i,
                                   chat=True)
            new, steps = new + out.new_tokens, steps + len(out.steps)
    finally:
        decoder_module.speculative_accept = rule
    result = {
        "prompts": [r["question_id"] for r in prompts],
        "steps": steps, "drafted_steps": len(overlaps), "mean_accepted_M": new / max(steps, 1),
        "first_token_overlap_mean": statistics.mean(overlaps) if overlaps else None,
        "first_token_overlap_median": statistics.median(overlaps) if overlaps else None,
        "stand_estimate_by_order": {str(j + 1): {"mean": m, "sightings": n} for j, (m, n) in enumerate(stand.overlap)},
        "provenance": provenance(model),
    }
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
