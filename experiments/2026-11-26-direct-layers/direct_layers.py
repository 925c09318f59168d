"""Issue 35 (the verifier toward its floor): Llama layers called directly as operators against through their modules.

Loads the default model once (its linears as ``load_model`` chooses them on this machine) and on leap's seed prompts
(:func:`leap.heads.prompts.seed_prompts`, never Spec-Bench) decodes each prompt plainly both ways, interleaved, each
call timed whole: ms per generated token (prefill included), pooled over prompts, and whether the outputs are
token-identical. "transformers" is ``LEAP_DIRECT_LAYERS=0`` (every layer through ``LlamaDecoderLayer.forward``);
"direct" is leap's default (:mod:`leap.core.modeling.direct.llama`). Then the calibrated costs both ways
(:func:`leap.core.decoding.calibrate.calibrate`, not cached): a plain step and a forward over ``k`` tokens (a
verification of ``k - 1`` drafts), in ms. Writes one JSON object to ``--out``.

    python experiments/2026-11-26-direct-layers/direct_layers.py --out docs/data/direct_layers.json
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from leap.core import load_model
from leap.core.decoding.calibrate import calibrate
from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.modeling.direct import llama as direct
from leap.core.runtime.device import wall_clock
from leap.core.runtime.provenance import provenance
from leap.heads.prompts import seed_prompts

WAYS = {"transformers": "0", "direct": "1"}


def use(way: str, model) -> None:
    """Switch every layer's call to ``way``; the run-time check runs here, outside any clock."""
    os.environ["LEAP_DIRECT_LAYERS"] = WAYS[way]
    direct.forget()
    assert direct.takes(model.layers[0]) == (way == "direct"), way


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    meta = provenance()
    torch.set_num_threads(args.threads)
    model = load_model("smollm2")
    decoder = SelfSpecDecoder(model, None)
    prompts = [model.encode(p, chat=True) for p in seed_prompts(args.prompts)]
    seconds = {way: 0.0 for way in WAYS}
    tokens = {way: 0 for way in WAYS}
    identical = 0
    for way in WAYS:
        use(way, model)
        decoder.generate(prompts[0], max_new_tokens=8)  # warm
    for r in range(args.rounds):
        for ids in prompts:
            outs = {}
            for way in (WAYS if r % 2 == 0 else reversed(WAYS)):
                use(way, model)
                start = wall_clock(model.device)
                out = decoder.generate(ids, max_new_tokens=args.tokens)
                seconds[way] += wall_clock(model.device) - start
                tokens[way] += len(out.token_ids)
                outs[way] = out.token_ids
            identical += outs["direct"] == outs["transformers"]
    result = {"provenance": meta, "linears": model.info.get("linears"), "prompts": len(prompts), "rounds": args.rounds,
              "tokens": args.tokens, "identical": identical, "calls": len(prompts) * args.rounds,
              "ms_per_token": {way: 1000 * seconds[way] / tokens[way] for way in WAYS}}
    result["direct_speedup"] = result["ms_per_token"]["transformers"] / result["ms_per_token"]["direct"]
    result["forward_ms"] = {}
    for way in WAYS:
        use(way, model)
        costs = calibrate(model, long_context=0, max_k=17, drafter_names=[])
        result["forward_ms"][way] = {"step": 1000 * costs.step_s,
                                     **{str(k): 1000 * costs.step_s * c for k, c in sorted(costs.verify_curve.items())
                                        if k in (2, 3, 5, 9, 13, 17)}}
    os.environ.pop("LEAP_DIRECT_LAYERS")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    ms = result["ms_per_token"]
    print(f"plain decoding, ms a token: through transformers {ms['transformers']:.1f}, direct {ms['direct']:.1f} "
          f"(direct {result['direct_speedup']:.2f}x as fast); {identical}/{result['calls']} outputs identical")
    for way, row in result["forward_ms"].items():
        print(f"{way}: forward over k tokens, ms: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()))


if __name__ == "__main__":
    main()
