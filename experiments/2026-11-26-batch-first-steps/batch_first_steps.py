"""What a drafter's first steps in a batch cost (issue 37: the batch search judged drafters by them). The default
model, 4 of leap's seed prompts (300+, never Spec-Bench) decoded together, the rows holding suffix, lowbit and
cascade; two batches: in each, three plain steps, then three steps of lowbit and three of cascade at cap 2, then
three more of lowbit after cascade's (its catch-up). Prints each step's seconds and the part spent beginning the
drafter's rows (BatchSession.begin_s). Usage: python experiments/2026-11-26-batch-first-steps/batch_first_steps.py"""

from __future__ import annotations

from leap.core import load_model
from leap.core.decoding.batch import BatchDecoder
from leap.heads.prompts import seed_prompts


def main() -> None:
    model = load_model()
    prompts = [model.encode(p, chat=True) for p in seed_prompts(400)[300:304]]
    decoder = BatchDecoder(model, [("suffix", {}), ("lowbit", {}), ("cascade", {})], num_tokens="auto", caps=(0, 2))
    names = ["suffix", "lowbit", "cascade"]
    for batch in range(2):
        session = decoder.start(prompts, max_new_tokens=64)
        steps = []
        for drafter, cap in [(0, 0)] * 3 + [(1, 2)] * 3 + [(2, 2)] * 3 + [(1, 2)] * 3:
            committed, seconds = session.step(cap, drafter)
            steps.append(f"{names[drafter] if cap else 'plain'} {seconds:.3f} s (begin {session.begin_s:.3f})")
        print(f"batch {batch}: " + "; ".join(steps))


if __name__ == "__main__":
    main()
