"""Which timed calls of a `leap bench` run capture CUDA graphs? The graph engine forced on the CPU (its stand-in
records a function for a graph), every capture and every re-binding of the graphs (`RESET`) counted by the call it
happened in: `(warm-up)` is untimed, `QID:METHOD` a timed call. Run from the repository's root with `leap bench`'s
arguments, e.g.

    python experiments/2026-11-28-gpu-regret/graph_captures.py bench --methods ar,suffix,leap-drafters \
        --device cpu --threads 2 --num-prompts 1 --max-new-tokens 64 --first-turn-only --quiet --out /tmp/gc

On a GPU each capture costs milliseconds (the default model's 92 graphs took 0.65 s on an H200)."""
import collections
import sys

import leap.bench.harness as harness
import leap.core.modeling.graphs.engine as engine
import leap.core.modeling.layers as layers

layers.default_engine = lambda device: "graphs"
where = ["(load)"]
captures, widths = collections.Counter(), collections.defaultdict(set)


def counted(real, label=None):
    def wrapper(*args, **kwargs):
        captures[where[0] + (f" {label}" if label else "")] += 1
        return real(*args, **kwargs)
    return wrapper


engine.capture = counted(engine.capture)
engine.LayerGraphs._reset = counted(engine.LayerGraphs._reset, "RESET")
real_run = engine.LayerGraphs.run


def run(self, hidden, *args, **kwargs):
    widths[where[0]].add(engine.bucket(hidden.shape[1]))
    return real_run(self, hidden, *args, **kwargs)


def inside(label_of, real):
    def wrapper(self, *args, **kwargs):
        where[0] = label_of(*args)
        try:
            return real(self, *args, **kwargs)
        finally:
            where[0] = "(between)"
    return wrapper


engine.LayerGraphs.run = run
harness.Bench._conversation = inside(lambda row, temperature, run_, name, *rest: f"{row['question_id']}:{name}",
                                     harness.Bench._conversation)
harness.Bench._warm_up = inside(lambda: "(warm-up)", harness.Bench._warm_up)

from leap.cli import main  # noqa: E402 - after the patches

main(sys.argv[1:])
for call in dict.fromkeys([*captures, *widths]):
    print(f"{call}: {captures.get(call, 0)} captures, widths run {sorted(widths.get(call, ()))}")
