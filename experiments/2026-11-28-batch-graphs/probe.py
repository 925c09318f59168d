"""Batched decoding on static buffers with its layers replayed (``BatchDecoder(graphs=True)``) against leap's eager
batch and transformers' static-cache ``generate`` (``hf-static``, the fastest plain batched decoding a GPU user gets),
on a random-weight model of a preset's shape: milliseconds a step for plain decoding and for ``suffix`` at cap 4,
each after an untimed warm-up at the same length (so the graphs are captured before the clock), and how many rows
the eager and static batches decode alike (in bfloat16 a row may part at a near-tie: that is counted, not hidden).

    python experiments/2026-11-28-batch-graphs/probe.py cuda smollm2-135m [B]   # on a GPU (bfloat16)
    python experiments/2026-11-28-batch-graphs/probe.py cpu tiny [B]            # the same path off a GPU (float32)
"""
import sys
import time

import torch

from leap.bench.methods import make_method
from leap.bench.smoke import build_random_model
from leap.core.decoding.batch import BatchDecoder

dev, preset = sys.argv[1], sys.argv[2]
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 4
dtype = torch.bfloat16 if dev == "cuda" else torch.float32
model = build_random_model(preset, dev, dtype)
g = torch.Generator().manual_seed(1)
hi = 500 if preset == "tiny" else 40000
prompts = [torch.randint(5, hi, (n,), generator=g).tolist() for n in (53, 78, 64, 85, 40, 71, 90, 66)[:rows]]
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
print(f"{preset} on {dev} ({dtype}), {rows} rows, prompts of {[len(p) for p in prompts]} tokens, 64 new", flush=True)


def timed(label, fn, steps_of):
    fn()  # warm-up at the same length: captures (graphs) and plans happen here
    sync()
    t = time.perf_counter()
    out = fn()
    sync()
    seconds = time.perf_counter() - t
    steps = steps_of(out)
    print(f"{label:40s} {seconds:7.3f} s {steps:4d} steps {1000 * seconds / steps:7.2f} ms/step", flush=True)
    return out


outs = {}
for drafter, cap in ((None, 0), ("suffix", 4)):
    for graphs in (False, True):
        decoder = BatchDecoder(model, drafter, num_tokens=cap, graphs=graphs)
        label = f"{drafter or 'plain'}{' cap 4' if cap else ''}, {'graphs' if graphs else 'eager'}"
        outs[label] = timed(label, lambda: decoder.generate(prompts, max_new_tokens=64), lambda o: o.steps)
        if graphs:
            engine = decoder._engines[rows]
            print(f"    {len(engine.graphs)} graphs, {len(engine.broken)} failed their check, captured in "
                  f"{engine.capture_s:.2f} s", flush=True)
peer = make_method("hf-static", model)
timed("hf-static (transformers, static cache)", lambda: peer.run_batch(prompts, max_new_tokens=64, temperature=0.0,
                                                                        seed=0), lambda r: 64)
for a, b in (("plain, eager", "plain, graphs"), ("suffix cap 4, eager", "suffix cap 4, graphs")):
    same = sum(x.token_ids == y.token_ids for x, y in zip(outs[a].rows, outs[b].rows))
    print(f"{b}: {same}/{rows} rows as {a}", flush=True)
