"""Why leap's batched plain decoding (`ar` at B = 4) ran 65-80 ms a step on the H200 while the batch search's plain
steps ran about 20: one random-weight model of the default model's shape, the same BatchDecoder timed alone, under
cProfile, and as the bench's methods in the harness's order.

    python experiments/2026-11-28-gpu-regret/batch_plain_probe.py cuda smollm2-135m            # PyTorch's SDPA choice
    python experiments/2026-11-28-gpu-regret/batch_plain_probe.py cuda smollm2-135m nocudnn    # cuDNN's attention off

Run at 1327435 on one H200 (outputs beside this file: batch_plain_probe_cudnn.txt, batch_plain_probe_no_cudnn.txt):
the first 64-token call at new key lengths took 94 ms a step with cuDNN's attention and 28.7 without; the same calls
again 19.5 and about 25. After that commit leap's eager forwards leave cuDNN's attention out on CUDA
(leap.core.modeling.kv_cache.eager_attention); LEAP_CUDNN_ATTENTION=1 gives the first run's choice back.
"""
import cProfile, io, pstats, sys, time, torch
from leap.bench.smoke import build_random_model
from leap.bench.methods import make_method
from leap.core.decoding.batch import BatchDecoder
dev, preset = sys.argv[1], sys.argv[2]
dtype = torch.bfloat16 if dev == "cuda" else torch.float32
model = build_random_model(preset, dev, dtype)
g = torch.Generator().manual_seed(1)
hi = 500 if preset == "tiny" else 40000
prompts = [torch.randint(5, hi, (n,), generator=g).tolist() for n in (53, 78, 64, 85)]
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
def timed(label, fn):
    sync(); t = time.perf_counter(); out = fn(); sync(); s = time.perf_counter() - t
    steps = out.steps if isinstance(out.steps, int) else len(out.steps)
    print(f"{label:34s} {s:7.3f} s {steps:4d} steps {1000 * s / steps:7.2f} ms/step", flush=True)
    return out
d = BatchDecoder(model)
d.generate(prompts, max_new_tokens=16)
timed("BatchDecoder(model) alone", lambda: d.generate(prompts, max_new_tokens=64))
pr = cProfile.Profile(); pr.enable(); d.generate(prompts, max_new_tokens=64); pr.disable()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18); print(s.getvalue()[-4000:], flush=True)
methods = {"ar": make_method("ar", model), "suffix-auto": make_method("suffix", model, batch_cap="auto")}
for n, m in methods.items():
    m.run_batch(prompts, max_new_tokens=16, temperature=0.0, seed=0); m.after_warm_up()
for rnd in range(2):
    for n, m in methods.items():
        timed(f"round {rnd} {n}", lambda: m.run_batch(prompts, max_new_tokens=64, temperature=0.0, seed=0))
timed("BatchDecoder(model) again", lambda: d.generate(prompts, max_new_tokens=64))
d2 = BatchDecoder(model); d2.generate(prompts, max_new_tokens=16)
timed("a new BatchDecoder(model)", lambda: d2.generate(prompts, max_new_tokens=64))
from leap.core.decoding.decoder import SelfSpecDecoder
sd = SelfSpecDecoder(model, None); sd.generate(prompts[0], max_new_tokens=64)
timed("single request, graph engine", lambda: sd.generate(prompts[0], max_new_tokens=64))
timed("BatchDecoder after graphs", lambda: d.generate(prompts, max_new_tokens=64))
pr = cProfile.Profile(); pr.enable(); d.generate(prompts, max_new_tokens=64); pr.disable()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12); print(s.getvalue()[-3000:], flush=True)
ld = make_method("leap-drafters", model)
ld.run_batch(prompts, max_new_tokens=16, temperature=0.0, seed=0); ld.after_warm_up()
timed("leap-drafters", lambda: ld.run_batch(prompts, max_new_tokens=64, temperature=0.0, seed=0))
timed("ar after leap-drafters", lambda: methods["ar"].run_batch(prompts, max_new_tokens=64, temperature=0.0, seed=0))
