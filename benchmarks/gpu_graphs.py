"""leap's graph engine against its eager layers and transformers' generate, on one GPU (issue 51).

    python benchmarks/gpu_graphs.py --out docs/data/gpu_graphs.json            # both shapes, ~2-3 minutes on an H100
    python benchmarks/gpu_graphs.py --presets smollm2-135m --dtypes float32   # one cell

Per shape and dtype, on random weights (costs only, nothing about acceptance), batch 1, a 64-token prompt, 64 new
tokens, median of ``--rounds`` after a warm-up, every figure from this one process on this one card:

* ms/token of plain decoding: leap ``eager`` (its Python-launched layers), leap ``graphs`` (per-layer CUDA graphs over
  the static cache), transformers' ``generate`` eager and with ``cache_implementation="static"`` (which compiles its
  step), and the floor: the weights read once at this card's measured copy rate;
* through the graph engine, one forward's time over a plain one-token step: a draft that skips the middle half of the
  layers, one that repeats the last quarter, and verification of 5 tokens (c(5));
* whether leap's greedy tokens are the same through both engines (float32: they must be).

Writes one JSON object (``--out``) with the provenance of the run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from leap.bench.smoke import build_random_model
from leap.core.decoding.calibrate import _median_time
from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.modeling.layers import LayerStack
from leap.core.runtime.provenance import provenance


def _median_s(fn, device, rounds: int) -> float:
    """The median of ``rounds`` timed calls of ``fn`` after one untimed warm-up (calibration's own timer)."""
    fn()
    return _median_time(fn, rounds, device)


def copy_rate(device: torch.device) -> float:
    """Bytes per second of a 1 GiB device-to-device copy (read + write counted once each; 16 MiB off a GPU)."""
    a = torch.empty(1 << (28 if device.type == "cuda" else 22), dtype=torch.float32, device=device)
    b = torch.empty_like(a)
    seconds = _median_s(lambda: b.copy_(a), device, 5)
    return 2 * a.numel() * a.element_size() / seconds


def forward_ratios(model, rounds: int) -> dict[str, float]:
    """Through the graph engine: one-token forwards under the draft plans, and a 5-token verification, over a plain
    one-token step (all with the LM head), after a 64-token context."""
    stack = LayerStack(model, "graphs")
    cache = stack.new_cache(256)
    L, device = model.num_layers, model.device
    ids = list(range(1, 70))
    plans = {"plain": stack.full_plan,
             "skip_middle_half": tuple((i, 1) for i in range(L) if not L // 4 <= i < L // 4 + L // 2),
             "repeat_last_quarter": tuple((i, 2 if i >= L - L // 4 else 1) for i in range(L))}
    with torch.inference_mode():
        stack.run_layers(stack.embed(ids[:64]), stack.full_plan, cache, 0)

        def forward(plan, q):
            def run():
                stack.logits(stack.run_layers(stack.embed(ids[64: 64 + q]), plan, cache, 64))
                stack.rollback(cache, 64)
            return run

        times = {name: _median_s(forward(plan, 1), device, rounds * 10) for name, plan in plans.items()}
        times["verify_5"] = _median_s(forward(stack.full_plan, 5), device, rounds * 10)
    out = {name: t / times["plain"] for name, t in times.items() if name != "plain"}
    out["plain_step_ms"] = times["plain"] * 1000
    out["graphs"] = stack.graphs.describe()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", default="smollm2-135m,llama3-8b")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only checks that the script runs (preset tiny)")
    args = ap.parse_args()
    device = torch.device(args.device)
    rate = copy_rate(device)
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    record = {"provenance": provenance(), "device": card, "copy_rate_gb_s": rate / 1e9,
              "runs": []}
    print(f"{record['device']}: copy rate {rate / 1e9:.0f} GB/s", file=sys.stderr)
    for preset in args.presets.split(","):
        for name in args.dtypes.split(","):
            if preset == "llama3-8b" and name == "float32" and (
                    device.type != "cuda" or torch.cuda.get_device_properties(device).total_memory < 60e9):
                continue
            dtype = getattr(torch, name)
            t_build = time.perf_counter()
            model = build_random_model(preset, str(device), dtype)
            prompt = torch.randint(1, model.vocab_size, (64,), generator=torch.Generator().manual_seed(0)).tolist()
            ids = torch.tensor([prompt], device=device)
            weights = sum(p.numel() * p.element_size() for p in model.hf_model.parameters())
            row = {"preset": preset, "dtype": name, "build_s": time.perf_counter() - t_build,
                   "floor_ms": 1000 * weights / rate}
            tokens = {}
            for engine in ("eager", "graphs"):
                decoder = SelfSpecDecoder(model, None, engine=engine)
                t0 = time.perf_counter()
                decoder.generate(prompt, max_new_tokens=args.new)  # warm-up (graphs: capture)
                row[f"leap_{engine}_first_call_s"] = time.perf_counter() - t0

                def run(d=decoder, e=engine):
                    tokens[e] = d.generate(prompt, max_new_tokens=args.new).token_ids
                row[f"leap_{engine}_ms"] = 1000 * _median_s(run, device, args.rounds) / args.new
            row["leap_tokens_identical"] = tokens["eager"] == tokens["graphs"]
            row["leap_tokens_first_difference"] = next(
                (i for i, (a, b) in enumerate(zip(tokens["eager"], tokens["graphs"])) if a != b), None)
            for label, kwargs in (("hf_eager", {}), ("hf_static", {"cache_implementation": "static"})):
                def hf(kw=kwargs):
                    with torch.inference_mode():
                        model.hf_model.generate(ids, max_new_tokens=args.new, min_new_tokens=args.new,
                                                do_sample=False, pad_token_id=0, **kw)
                t0 = time.perf_counter()
                hf()  # warm-up (static: compilation)
                row[f"{label}_first_call_s"] = time.perf_counter() - t0
                row[f"{label}_ms"] = 1000 * _median_s(hf, device, args.rounds) / args.new
            row.update(forward_ratios(model, args.rounds))
            print(json.dumps(row), flush=True)
            record["runs"].append(row)
            if args.out:  # after every cell: a run stopped at its time limit keeps the cells it finished
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).write_text(json.dumps(record, indent=1))
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
