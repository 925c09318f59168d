"""Issue 35: how long the low-bit draft takes to ingest a long prompt, against the float32 model's prefill.

For the first rag and the first summarization Spec-Bench question (first turns, chat template), times in this
process: leap's float32 prefill (``SelfSpecDecoder.start``), and llama.cpp's ingestion of the same tokens
(``LlamaCppRunner.sync`` on an empty cache) for the shipped Q4_1 GGUF and its Q8_0 re-encoding (lowbit's
``quant``), and the KV handoff into the Q8_0 runner (``LlamaCppRunner.take_kv`` of the prefill's cache: what
``lowbit`` does by default since issue 35's handoff; its run-time check runs once, untimed, before);
medians of ``--repeats`` runs, interleaved. Writes one JSON object to ``--out``.

    python experiments/2026-11-25-lowbit-ingestion/lowbit_ingestion.py --out docs/data/lowbit_ingestion.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from importlib import resources

import torch

from leap.core import load_model
from leap.core.decoding.decoder import SelfSpecDecoder
from leap.core.modeling.kv_cache import PromptKV
from leap.core.modeling.low_bit import LlamaCppRunner, gguf_of, requantized
from leap.core.runtime.provenance import provenance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model("smollm2")
    questions = [json.loads(line) for line in
                 resources.files("leap.data").joinpath("spec_bench/question.jsonl").read_text().splitlines()]
    decoder = SelfSpecDecoder(model, None)
    runners = {quant: LlamaCppRunner(requantized(gguf_of(model), quant), n_ctx=8192, threads=args.threads)
               for quant in ("native", "q8_0")}
    rows = []
    for category in ("rag", "summarization"):
        ids = model.encode(next(q for q in questions if q["category"] == category)["turns"][0], chat=True)
        times: dict[str, list[float]] = {"float32 prefill": [], **{f"llama.cpp {q}": [] for q in runners},
                                         "handoff q8_0": []}
        session = decoder.start(ids, max_new_tokens=1)
        handed = runners["q8_0"].take_kv(ids[:-1], PromptKV(session.cache, len(ids) - 1))  # the check, untimed
        for _ in range(args.repeats):
            session = decoder.start(ids, max_new_tokens=1)
            times["float32 prefill"].append(session.prefill_time_s)
            runners["q8_0"].truncate(0)
            start = time.perf_counter()
            handed = runners["q8_0"].take_kv(ids[:-1], PromptKV(session.cache, len(ids) - 1)) and handed
            times["handoff q8_0"].append(time.perf_counter() - start)
            for quant, runner in runners.items():
                runner.truncate(0)
                start = time.perf_counter()
                runner.sync(ids)
                times[f"llama.cpp {quant}"].append(time.perf_counter() - start)
        row = {"category": category, "prompt_tokens": len(ids), "handed_off": handed,
               **{k: round(statistics.median(v), 3) for k, v in times.items()}}
        print(row)
        rows.append(row)
    with open(args.out, "w") as f:
        json.dump({"provenance": provenance(model), "threads": args.threads, "repeats": args.repeats, "rows": rows}, f,
                  indent=1)


if __name__ == "__main__":
    main()
