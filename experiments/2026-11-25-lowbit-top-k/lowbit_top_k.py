"""Issue 35: what cutting the low-bit draft's sampled distribution to its top k costs in acceptance at T = 1.

The expected acceptance of one draft token under speculative sampling is ``sum(min(p, q))`` (Leviathan et al.,
2023): ``p`` the target's distribution, ``q`` the draft's. ``lowbit`` draws from ``q`` cut to its ``top_k`` most
likely tokens and renormalised, or (``top_k=0``) from the whole of it. Teacher forced on the target's own sampled
answers to leap's seed prompts (:func:`leap.heads.prompts.seed_prompts`, Apache-2.0; numbers 1400-1411, outside
the heads' training prompts and never Spec-Bench), this measures ``sum(min(p, q_k))`` at every position for each
k, with the default model and ``lowbit``'s default draft (its runner as ``make_runner`` builds it). No timing:
acceptance only. Writes one JSON object (means over positions, with a 95% t-interval over prompts) to ``--out``.

    python experiments/2026-11-25-lowbit-top-k/lowbit_top_k.py --out docs/data/lowbit_top_k.json
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from scipy import stats

from leap.core import load_model
from leap.core.modeling.low_bit import make_runner
from leap.core.runtime.provenance import provenance
from leap.heads.prompts import seed_prompts

KS = (16, 64, 256, 1024, 4096, 0)  # 0: the whole vocabulary


def cut(q: torch.Tensor, k: int) -> torch.Tensor:
    """``q`` cut to its ``k`` most likely tokens and renormalised, as ``lowbit`` draws (``k = 0``: ``q``)."""
    if not k:
        return q
    top = torch.topk(q, k)
    return torch.zeros_like(q).scatter_(0, top.indices, top.values / top.values.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=96, help="sampled answer tokens per prompt")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model("smollm2")
    runner = make_runner(model)
    hf, tok = model.hf_model, model.tokenizer
    gen = torch.Generator().manual_seed(args.seed)
    per_prompt: dict[int, list[float]] = {k: [] for k in KS}
    for text in seed_prompts(1400 + args.prompts)[1400:]:
        ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                      return_dict=True)["input_ids"]
        seq = list(ids)
        with torch.inference_mode():
            for _ in range(args.tokens):  # the target's own answer, sampled at the temperature
                p = torch.softmax(hf(torch.tensor([seq])).logits[0, -1].float() / args.temperature, -1)
                seq.append(int(torch.multinomial(p, 1, generator=gen)))
            target = torch.softmax(hf(torch.tensor([seq])).logits[0].float() / args.temperature, -1)
        runner.reset()
        rows = [runner.sync(seq[: len(ids)])] + [runner.feed([t]) for t in seq[len(ids):-1]]
        for k in KS:
            alphas = [float(torch.minimum(target[len(ids) - 1 + j], cut(torch.softmax(r.float() / args.temperature,
                                                                                    -1), k)).sum())
                      for j, r in enumerate(rows)]
            per_prompt[k].append(float(np.mean(alphas)))
    result = {"meta": provenance(), "temperature": args.temperature, "prompts": args.prompts, "tokens": args.tokens,
              "acceptance": {}}
    for k in KS:
        v = np.array(per_prompt[k])
        half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
        result["acceptance"]["whole" if k == 0 else str(k)] = {
            "mean": round(float(v.mean()), 4), "ci95": [round(float(v.mean() - half), 4), round(float(v.mean() + half), 4)],
            "per_prompt": [round(x, 4) for x in v]}
        print(f"top_k {'whole' if k == 0 else k:>5}: sum(min(p, q)) {v.mean():.4f} [{v.mean() - half:.4f}, "
              f"{v.mean() + half:.4f}]")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
