"""What a lowbit draft token costs alone and right after a target forward (issue 35: the main job's profile says a
draft token takes 12.3 ms there, llama.cpp's own one-token pass less). The default model on the README's prompt:
eight chains of 8 draft tokens through the llama.cpp runner, alone, then each chain right after one plain step of the
float32 target; the median per token, first token of a chain apart. Usage: python experiments/2026-11-26-lowbit-after-target/lowbit_after_target.py"""

from __future__ import annotations

import statistics
import time

import torch

from leap.core import SelfSpecDecoder, load_model
from leap.core.modeling.low_bit import make_runner


def main() -> None:
    model = load_model()
    ids = model.encode("Explain speculative decoding in two sentences.", chat=True)
    runner = make_runner(model)
    runner.sync(ids)

    def chain(n: int) -> list[float]:
        out, token = [], ids[-1]
        for _ in range(n):
            t0 = time.perf_counter()
            token = int(torch.argmax(runner.feed([token])))
            out.append(time.perf_counter() - t0)
        runner.truncate(len(ids))
        return out

    session = SelfSpecDecoder(model, None).start(ids, max_new_tokens=200)
    for label, before in (("alone", lambda: None), ("after a target step", session.step)):
        times = []
        for _ in range(8):
            before()
            times += chain(8)
        first = statistics.median(times[0::8]) * 1e3
        later = statistics.median([t for i, t in enumerate(times) if i % 8]) * 1e3
        print(f"{label}: first draft token of a chain {first:.2f} ms, later ones {later:.2f} ms")


if __name__ == "__main__":
    main()
