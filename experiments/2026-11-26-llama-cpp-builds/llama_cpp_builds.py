"""A draft token's and a prompt's cost in llama.cpp, by how llama.cpp was built (docs/drafters.md, "llama.cpp's build").

    PYTHONPATH=DIR python experiments/2026-11-26-llama-cpp-builds/llama_cpp_builds.py --label NAME [--gguf PATH] [--extra-bufts 0|1] >> OUT.jsonl

``DIR`` holds a llama-cpp-python build (``pip install --no-deps --target DIR WHEEL``); the script loads the default
model's Q8_0 draft (what ``lowbit`` drafts with; re-encoded from the shipped Q4_1 by leap's cache) and times, on the
threads torch uses: taking in a 700-token prompt (best of 3) and one-token decodes after it (median of 50, after 10
untimed). One JSON line: the label, llama.cpp's system info, the times, the provenance.
"""
import argparse
import json
import statistics
import time

import llama_cpp
import torch

from leap.core.modeling.llama_cpp.library import _silence, requantized
from leap.core.modeling.model import resolve_model
from leap.core.runtime.provenance import provenance


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--gguf", default=None)
    ap.add_argument("--quant", default="q8_0", help="the shipped Q4_1 re-encoded by leap's cache (default q8_0)")
    ap.add_argument("--extra-bufts", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp's threads (default: torch's)")
    args = ap.parse_args()
    if args.gguf is None:
        from pathlib import Path

        source = resolve_model("smollm2")
        args.gguf = str(requantized(Path(source.path) / str(source.gguf_file), args.quant))
    _silence(llama_cpp)
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.use_extra_bufts = bool(args.extra_bufts)
    model = llama_cpp.llama_model_load_from_file(args.gguf.encode(), params)
    threads = args.threads or torch.get_num_threads()
    c = llama_cpp.llama_context_default_params()
    c.n_ctx = c.n_batch = 1024
    c.n_ubatch, c.n_threads, c.n_threads_batch = 512, threads, threads
    ctx = llama_cpp.llama_init_from_model(model, c)
    batch = llama_cpp.llama_batch_init(1024, 0, 1)
    mem = llama_cpp.llama_get_memory(ctx)

    def decode(tokens, start):
        for i, t in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = t, start + i, 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = i == len(tokens) - 1
        batch.n_tokens = len(tokens)
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    prompt = [(i * 7) % 40000 + 10 for i in range(700)]
    ingest = []
    for _ in range(3):
        llama_cpp.llama_memory_clear(mem, True)
        t0 = time.perf_counter()
        decode(prompt, 0)
        ingest.append(time.perf_counter() - t0)
    one = []
    for i in range(60):
        t0 = time.perf_counter()
        decode([100 + i], 700 + i)
        one.append(time.perf_counter() - t0)
    print(json.dumps({"label": args.label, "gguf": args.gguf.rsplit("/", 1)[-1], "extra_bufts": bool(args.extra_bufts), "threads": threads,
                      "system_info": llama_cpp.llama_print_system_info().decode(),
                      "ingest_700_s": min(ingest), "one_token_ms": 1000 * statistics.median(one[10:]),
                      "provenance": provenance()}))


if __name__ == "__main__":
    main()
