"""``lowbit`` alone against ``lowbit`` with its kin ``cascade`` (one bandit over both, as the batch search keeps them
through its elimination) and plain batched decoding, in turn on the same batches of leap's seed prompts, each decoder
after an untimed 16-token warm-up; prints per batch each one's wall time and, per drafter (d0 ``lowbit``, d1
``cascade``), its counted drafting steps and what they gave over plain steps all in (plain steps' seconds for their
tokens over theirs, as :class:`~leap.core.policies.loss_budget.DraftingTally` counts).

    python -m leap.heads.prompts P.jsonl 1900 32
    python experiments/2026-11-29-all-in-budget/kin.py P.jsonl 4 8     (rows a batch, batches)
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
rows = int(sys.argv[2]); nb = int(sys.argv[3])
batches = [encoded[i:i + rows] for i in range(0, nb * rows, rows)]
settings = dict(num_tokens="auto", caps=(0, 2, 4, 8, 16), loss_budget=0.03, first_step_setup="switch")
forms = {"lowbit": BatchDecoder(model, "lowbit", **settings),
         "kin": BatchDecoder(model, [("lowbit", {}), ("cascade", {})], **settings),
         "plain": BatchDecoder(model)}
for name, decoder in forms.items():
    decoder.generate(batches[0], max_new_tokens=16)
    decoder.forget()
tot = collections.defaultdict(float)
for b, batch in enumerate(batches):
    line = [str(b)]
    for name, decoder in forms.items():
        start = time.perf_counter()
        out = decoder.generate(batch, max_new_tokens=128)
        wall = time.perf_counter() - start
        tot[name] += wall
        per = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for d, cap, r, c, s in zip(out.drafters, out.caps, out.step_rows, out.step_committed, out.step_s):
            rate = decoder._plain_rate(r) if cap else None
            if rate:
                per[d][0] += 1
                per[d][1] += s
                per[d][2] += c / r / rate
        line.append(f"{name} {wall:.1f}s " + " ".join(f"d{d}:{n}st {p/s:.2f}" for d, (n, s, p) in sorted(per.items())))
    print(" | ".join(line), flush=True)
print({k: round(v, 1) for k, v in tot.items()})
