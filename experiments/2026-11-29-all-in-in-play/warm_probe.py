"""How much of a batch's first drafting step with ``lowbit`` is one-time loading: four batches of 8 of leap's seed
prompts (``ab.sh``'s prompts-b8.jsonl, seed-1800..), each a plain-ish step with ``prompt-lookup``, then ``lowbit``'s
first and second steps, timed. The first batch of the process pays the low-bit runner's loading; later batches only
begin their rows. Usage: python experiments/2026-11-29-all-in-in-play/warm_probe.py PROMPTS.jsonl (cpu, 2 threads)."""

import json
import sys
import time

import torch

from leap.core.decoding.batch import BatchDecoder
from leap.core.modeling.model import load_model

torch.set_num_threads(2)
model = load_model(device="cpu")
texts = [json.loads(line)["turns"][0] for line in open(sys.argv[1])]
prompts = [model.encode_messages([{"role": "user", "content": t}], chat=True) for t in texts[:32]]
decoder = BatchDecoder(model, [("prompt-lookup", {}), ("lowbit", {})], num_tokens=2)
for i in range(0, len(prompts), 8):
    session = decoder.start(prompts[i:i + 8], max_new_tokens=8)
    times = []
    for drafter in (0, 1, 1):
        t = time.perf_counter()
        session.step(2, drafter)
        times.append(time.perf_counter() - t)
    print(f"batch {i // 8}: prompt-lookup step {times[0]:.3f} s, lowbit first step {times[1]:.3f} s, "
          f"next {times[2]:.3f} s")
