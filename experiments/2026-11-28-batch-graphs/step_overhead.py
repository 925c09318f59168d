"""Per-step overhead of batched decoding on the tiny random model (float32, CPU, 2 threads), where a step's Python work
is a large share of it: a call of 8 rows, 64 new tokens, plain and with `suffix` at cap 4, best of 15 after a warm-up.

    python experiments/2026-11-28-batch-graphs/step_overhead.py
"""
import time, torch
torch.set_num_threads(2)
from leap.bench.smoke import build_random_model
from leap.core.decoding.batch import BatchDecoder
model = build_random_model("tiny", "cpu", torch.float32)
g = torch.Generator().manual_seed(1)
prompts = [torch.randint(5, 500, (n,), generator=g).tolist() for n in (53, 78, 64, 85, 40, 71, 90, 66)]
for label, dec in (("plain", BatchDecoder(model)), ("suffix4", BatchDecoder(model, "suffix", num_tokens=4))):
    dec.generate(prompts, max_new_tokens=64)
    best = min((lambda t: (dec.generate(prompts, max_new_tokens=64), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(15))
    print(label, "%.1f ms a call (best of 15)" % (1000 * best))
