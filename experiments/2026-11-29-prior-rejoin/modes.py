"""Does the batch decoder's form change what its bandit chooses? ``lowbit`` alone (a bandit over caps) against
``lowbit`` with a held ``suffix`` (a bandit over ``(drafter, cap)`` arms, ``suffix``'s closed), on the same batches of
leap's seed prompts, alternating, each after an untimed 16-token warm-up; prints per batch the wall time, the caps of
its steps and the bandit's measured goodput of ``lowbit`` over plain decoding's.

    python experiments/2026-11-29-prior-rejoin/modes.py PROMPTS.jsonl [B]   (PROMPTS: python -m leap.heads.prompts)
"""
import collections
import json
import sys
import time

import torch

from leap.core.decoding.batch import BatchDecoder
from leap.core.modeling.model import load_model

torch.set_num_threads(2)
model = load_model(device="cpu")
encoded = [model.encode(json.loads(line)["turns"][0], chat=True) for line in open(sys.argv[1])]
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 8
batches = [encoded[i:i + rows] for i in range(0, 3 * rows, rows)]
settings = dict(num_tokens="auto", caps=(0, 2, 4, 8, 16), loss_budget=0.03, first_step_setup="switch")
forms = {"alone": BatchDecoder(model, "lowbit", **settings),
         "held": BatchDecoder(model, [("lowbit", {}), ("suffix", {})], **settings)}
for name, decoder in forms.items():
    decoder.generate(batches[0], max_new_tokens=16)
    decoder.forget()
    decoder.retire({1} if name == "held" else set())
for b, batch in enumerate(batches):
    for name, decoder in forms.items():
        start = time.perf_counter()
        out = decoder.generate(batch, max_new_tokens=128)
        wall = time.perf_counter() - start
        ratios = {d: round(r, 2) for d, r in decoder.goodput_over_plain(rows).items()}
        print(b, name, f"{wall:.1f} s", dict(sorted(collections.Counter(out.caps).items())), ratios, flush=True)
