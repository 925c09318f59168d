"""``leap bench``: every method on the same prompts, in one process, interleaved per prompt.

Order of work (Spec-Bench's protocol, with interleaving so that machine drift hits every method
alike): warm-up generations first (not recorded); then for each prompt, temperature and run, every
method in turn - plain decoding (``ar``, always first: it is the speedup baseline and the reference
for the losslessness check) and then the others - and for multi-turn questions (MT-Bench) every turn
in order, each turn's prompt being the model's chat template over the earlier turns and *that
method's own* earlier answers.

Each finished generation is appended to ``OUT/records.jsonl`` at once (:mod:`leap.bench.records`);
a method that raises is recorded as ``failed`` for that prompt (with the error) and the run goes on;
``resume=True`` skips what the folder already holds. For greedy runs every method's tokens are
compared with plain decoding's for the same prompt, turn and run (``lossless``, ``first_mismatch``).

Who calls what: ``leap bench`` (:mod:`leap.cli`) builds a :class:`Bench` and calls :meth:`Bench.run`;
``leap report`` reads the folder afterwards.
"""

from __future__ import annotations

import json
import os
import platform
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from leap.bench.methods import BenchMethod, BenchOptions, MethodResult, make_method
from leap.core.runtime.provenance import provenance
from leap.bench.records import MemoryRecords, RecordFile, record_key, settings_conflict
from leap.core.runtime.device import wall_clock
from leap.core.errors import SettingsError
from leap.core.modeling.model import LeapModel

__all__ = ["Bench", "BenchSettings", "first_mismatch", "generations", "time_parts", "TIME_PARTS"]


@dataclass
class BenchSettings:
    """What ``leap bench`` runs. ``methods`` gains ``ar`` in front if missing (the baseline)."""

    methods: Sequence[str] = ("ar", "leap")
    temperatures: Sequence[float] = (0.0,)
    max_new_tokens: int = 128
    runs: int = 1
    warmup: int = 1
    warmup_tokens: int = 16
    chat: bool = True
    seed: int = 0
    options: BenchOptions = field(default_factory=BenchOptions)
    method_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: > 1: the prompts' first turns are decoded B at a time (:func:`batches`), one record per batch
    batch_size: int = 1

    def __post_init__(self) -> None:
        names = [m for m in dict.fromkeys(self.methods) if m]
        self.methods = ["ar", *[m for m in names if m != "ar"]]
        self.temperatures = [float(t) for t in self.temperatures]
        if any(t < 0 for t in self.temperatures):
            raise SettingsError(f"temperatures must be >= 0 (0 = greedy), got {self.temperatures}")
        if self.batch_size < 1:
            raise SettingsError(f"batch_size must be at least 1, got {self.batch_size}")
        if self.max_new_tokens < 1 or self.runs < 1 or self.warmup < 0:
            raise SettingsError("max_new_tokens and runs must be at least 1, warmup at least 0")
        labels = {m.partition("=")[0].strip() for m in self.methods}
        unknown = set(self.method_args) - labels
        if unknown:
            raise SettingsError(f"--method-arg names methods that are not run: {sorted(unknown)}; "
                                f"methods: {self.methods}")


#: what the harness warms its methods up on (never an evaluation prompt; :meth:`Bench._warm_up`)
WARM_UP_PROMPTS = ("Write two sentences about the sea.", "List three fruits and their colours.",
                   "Explain what a compiler does.", "Give a short tip for learning to cook.")


def first_mismatch(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where two token lists differ (a length difference counts), or None."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


TIME_PARTS = ("prefill_s", "decode_s", "search_overhead_s")


def time_parts(total: float, parts: dict[str, float]) -> dict[str, float]:
    """A record's time fields: every named part (0 when the method has none) and ``other_s``, the rest
    of the harness's total (space building outside the search's own clock, tokenisation, a peer's whole
    ``generate``), so that the parts sum to ``wall_time_s``."""
    unknown = set(parts) - set(TIME_PARTS)
    if unknown:
        raise SettingsError(f"unknown time parts {sorted(unknown)}; a method may report {TIME_PARTS}")
    out = {name: float(parts.get(name, 0.0)) for name in TIME_PARTS}
    out["other_s"] = total - sum(out.values())
    return out


def batches(rows: Sequence[dict], size: int) -> list[dict]:
    """The prompts' first turns, ``size`` at a time in order (the last batch may be smaller), as rows the harness
    runs like prompts: ``question_id`` ``b0``, ``b1``, ...; ``category`` the members' when they share one, else
    ``batch``; ``batch`` the member rows. One record per batch and method: its wall time around the whole
    batched call, its tokens all rows' (so ``leap report``'s speedup is the throughput ratio, paired by batch)."""
    out = []
    for i in range(0, len(rows), size):
        members = [{**r, "turns": r["turns"][:1]} for r in rows[i: i + size]]
        cats = {m["category"] for m in members}
        out.append({"question_id": f"b{i // size}", "category": cats.pop() if len(cats) == 1 else "batch",
                    "turns": [f"batch of {len(members)}"], "batch": members})
    return out


def generations(rows: Sequence[dict], settings: BenchSettings) -> int:
    """How many generations ``rows`` make (turns x temperatures x runs x methods)."""
    return sum(len(r["turns"]) for r in rows) * len(settings.temperatures) * settings.runs * len(settings.methods)


def machine_info(model: LeapModel) -> dict[str, Any]:
    """Where a run ran: the report prints it beside the tables."""
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "device": str(model.device), "dtype": str(model.dtype).replace("torch.", ""),
            "cuda": torch.cuda.get_device_name(model.device) if model.device.type == "cuda" else None,
            "onednn_linears": int(model.info.get("onednn_linears", 0)), "layer_call": model.info.get("layer_call"),
            "engine": model.info.get("engine")}


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass


class Bench:
    """One benchmark run into a results folder (see the module docstring)."""

    def __init__(self, model: LeapModel, rows: Sequence[dict], settings: BenchSettings, out: str | Path | None, *,
                 resume: bool = False, progress: bool = True, records: RecordFile | MemoryRecords | None = None) -> None:
        if not rows:
            raise SettingsError("no prompts selected; check --prompts / --categories / --num-prompts")
        if settings.batch_size > 1 and not all("batch" in r for r in rows):
            rows = batches(rows, settings.batch_size)
        self.model, self.rows, self.settings = model, list(rows), settings
        self.file = records if records is not None else RecordFile(out, resume=resume)
        self.progress = progress
        self.methods: dict[str, BenchMethod] = {}
        for entry in settings.methods:  # "NAME" or "LABEL=NAME" (the same method twice, with other --method-args)
            label, _, name = entry.partition("=")
            label = label.strip()
            self.methods[label] = make_method(name.strip() or label, model, settings.options,
                                              **settings.method_args.get(label, {}))
        self._totals: dict[tuple[str, float], list[float]] = {}
        self._divergence_stack: Any = None  # the plain model's layers, made at the first divergence (_margin)

    # ------------------------------------------------------------------ the run
    def run(self) -> RecordFile:
        from tqdm import tqdm

        meta = self.meta_record(len(self.rows))
        conflict = settings_conflict([*self.file.records, json.loads(json.dumps(meta, default=str))])
        if conflict:  # --resume must continue the same experiment: a table would pool two (issue 36)
            raise SettingsError(f"--resume with other settings than the records' ({conflict}, records first): "
                                "resume with the records' settings, or choose another --out folder")
        self.file.append(meta)
        self._warm_up()
        done = self.file.done()
        with tqdm(total=self.generations(self.rows), desc="leap bench", disable=not self.progress,
                  dynamic_ncols=True) as bar:
            for row in self.rows:
                self.run_row(row, done, bar)
        return self.file

    def meta_record(self, prompts: int) -> dict[str, Any]:
        """The run's first record: settings, model, machine and provenance (a Ray worker makes the driver's)."""
        s = self.settings
        return {"kind": "meta", "time": time.strftime("%Y-%m-%d %H:%M:%S"), "model": self.model.name,
                "num_layers": self.model.num_layers, "prompts": prompts,
                "settings": {**asdict(s), "options": asdict(s.options)}, "machine": machine_info(self.model),
                "provenance": provenance(self.model)}

    def generations(self, rows: Sequence[dict]) -> int:
        return generations(rows, self.settings)

    def run_row(self, row: dict, done: set, bar: Any = None) -> None:
        """Every temperature, run and method of one prompt, interleaved, into :attr:`file` (the unit of work a
        Ray worker takes, :mod:`leap.bench.on_ray`)."""
        s = self.settings
        bar = bar if bar is not None else _NoBar()
        for temperature in s.temperatures:
            for run in range(s.runs):
                for name, method in self.methods.items():
                    self._conversation(row, temperature, run, name, method, done, bar)

    def _warm_up(self) -> None:
        """Untimed calls of every method before the run, on prompts of the harness's own (:data:`WARM_UP_PROMPTS`),
        never an evaluation prompt: a drafter that keeps its context (lowbit's llama.cpp cache) or a search memory
        would otherwise carry the first evaluated prompt into its timed run - a free ingestion, a search tuned on it.
        At each of the run's temperatures: the batch search makes its drafters per condition of its memory (sampled
        batches apart), and warmed up at T = 0 alone it began them inside its first timed batch at T = 1. Then every
        method forgets what the warm-up taught it (:meth:`~leap.bench.methods.BenchMethod.after_warm_up`)."""
        s = self.settings
        size = len(self.rows[0].get("batch", [None]))
        texts = [WARM_UP_PROMPTS[i % len(WARM_UP_PROMPTS)] for i in range(size)]
        batch = [self.model.encode_messages([{"role": "user", "content": t}], chat=s.chat) for t in texts]
        for temperature in [t for _ in range(s.warmup) for t in sorted(set(s.temperatures))]:
            for method in self.methods.values():  # at each temperature timed: a batch search's drafters per condition
                try:
                    if "batch" in self.rows[0]:
                        method.run_batch(batch, max_new_tokens=s.warmup_tokens, temperature=temperature, seed=s.seed)
                    else:
                        method.run(batch[0], max_new_tokens=s.warmup_tokens, temperature=temperature, seed=s.seed)
                except Exception:  # noqa: BLE001 - the measured run records the failure
                    pass
        longest = [m for m in self.methods.values() if m.warms_up_at_run_length]
        if longest and s.warmup:
            self._warm_up_at_run_length(longest, batch[0], size)
        for method in self.methods.values():  # what the warm-up taught a search is not what its records name
            method.after_warm_up()

    def _warm_up_at_run_length(self, methods: list[BenchMethod], own: list[int], size: int) -> None:
        """One more untimed call of each of ``methods`` (``BenchMethod.warms_up_at_run_length``: hf-static, whose
        compiled step is sized by the longest call so far; leap's methods on the graph engine, whose graphs are bound
        to such a cache): the harness's own prompt repeated to the length of the longest evaluated first turn, at the
        run's ``max_new_tokens``; in a batch run, a batch of ``size`` such rows. Only the evaluated prompts' lengths are
        read, never their text; a later turn longer than every first turn can still cost one compilation."""
        s = self.settings
        members = [m for row in self.rows for m in row.get("batch", [row])]
        length = max(len(self.model.encode_messages([{"role": "user", "content": m["turns"][0]}], chat=s.chat))
                     for m in members if m.get("turns"))
        ids = (own * (length // len(own) + 1))[:length]
        for method in methods:
            try:
                if "batch" in self.rows[0]:
                    method.run_batch([ids] * size, max_new_tokens=s.max_new_tokens, temperature=0.0, seed=s.seed)
                else:
                    method.run(ids, max_new_tokens=s.max_new_tokens, temperature=0.0, seed=s.seed)
            except Exception:  # noqa: BLE001 - the measured run records the failure
                pass

    def _conversation(self, row: dict, temperature: float, run: int, name: str, method: BenchMethod,
                      done: set, bar: Any) -> None:
        messages: list[dict[str, str]] = []
        failed = False
        for turn, text in enumerate(row["turns"]):
            messages.append({"role": "user", "content": text})
            base = {"kind": "answer", "question_id": row["question_id"], "category": row["category"], "turn": turn,
                    "temperature": temperature, "run": run, "method": name}
            if record_key(base) in done:
                prior = self.file.find(**{k: base[k] for k in ("question_id", "turn", "temperature", "run", "method")})
                messages.append({"role": "assistant", "content": prior["text"] if prior else ""})
                bar.update(1)
                continue
            if failed:
                self.file.append({**base, "status": "failed", "error": "an earlier turn of this question failed"})
                bar.update(1)
                continue
            rec = self._generate(base, messages, method, temperature, run, turn, row.get("batch"))
            failed = rec["status"] != "ok"
            self.file.append(rec)
            messages.append({"role": "assistant", "content": rec.get("text", "")})
            bar.update(1)
            bar.set_postfix_str(self._postfix(name, row["category"], temperature, rec))

    def _generate(self, base: dict, messages: list[dict], method: BenchMethod, temperature: float, run: int,
                  turn: int, members: list[dict] | None = None) -> dict[str, Any]:
        s = self.settings
        seed = s.seed + zlib.crc32(str(base["question_id"]).encode()) % 100_000 + 1_000_003 * run + 7919 * turn
        try:
            if members is not None:  # a batch: its members' first turns, decoded together
                batch = [self.model.encode_messages([{"role": "user", "content": m["turns"][0]}], chat=s.chat)
                         for m in members]
                ids = [t for b in batch for t in b]
            else:
                ids = self.model.encode_messages(messages, chat=s.chat)
            start = wall_clock(self.model.device)  # the harness's clock: the whole call, whatever it does
            if members is not None:
                res: MethodResult = method.run_batch(batch, max_new_tokens=s.max_new_tokens, temperature=temperature,
                                                     seed=seed)
            else:
                res = method.run(ids, max_new_tokens=s.max_new_tokens, temperature=temperature, seed=seed)
            total = wall_clock(self.model.device) - start
        except KeyboardInterrupt:
            raise
        except Exception as err:  # noqa: BLE001 - recorded, and the run goes on
            return {**base, "status": "failed", "error": f"{type(err).__name__}: {err}"}
        rec = {**base, "status": "ok", "prompt_tokens": len(ids), "new_tokens": len(res.token_ids),
               "wall_time_s": total, **time_parts(total, res.parts), "steps": res.steps, "accept_lengths": res.accepted_lengths,
               "config": res.config, "text": self.model.decode(res.token_ids), "token_ids": res.token_ids,
               **res.extra, **({"batch_size": len(members), "row_question_ids": [m["question_id"] for m in members],
                                "row_prompt_tokens": [len(b) for b in batch]} if members is not None else {})}
        if temperature == 0 and base["method"] != "ar":
            ref = self.file.find(question_id=base["question_id"], turn=turn, temperature=temperature, run=run,
                                 method="ar")
            if ref is not None:
                mismatch = first_mismatch(res.token_ids, ref["token_ids"])
                rec["lossless"], rec["first_mismatch"] = mismatch is None, mismatch
                if mismatch is not None and members is None and self.model.dtype != torch.float32:
                    rec["divergence_margin"] = self._margin(ids, ref["token_ids"], res.token_ids)
        return rec

    def _margin(self, prompt: list[int], reference: list[int], tokens: list[int]) -> float | None:
        """Plain decoding's top-2 logit margin where ``tokens`` first leave ``reference`` (after the clock stopped):
        outside float32 a verification sums in another order than a one-token step, and at a near-tie the two pick
        different tokens - rounding, reported with its margin (:mod:`leap.core.verify.divergence`)."""
        from leap.core.modeling.layers import LayerStack
        from leap.core.verify.divergence import first_divergence

        try:
            self._divergence_stack = self._divergence_stack or LayerStack(self.model)
            found = first_divergence(self.model, prompt, reference, tokens, stack=self._divergence_stack)
        except Exception:  # noqa: BLE001 - a margin is a report's detail, never a reason to lose the record
            return None
        return None if found is None else round(float(found["margin"]), 4)

    def _postfix(self, name: str, category: str, temperature: float, rec: dict) -> str:
        if rec["status"] == "ok":
            tot = self._totals.setdefault((name, temperature), [0.0, 0.0])
            tot[0] += rec["new_tokens"]
            tot[1] += rec["wall_time_s"]
        mine, plain = self._totals.get((name, temperature)), self._totals.get(("ar", temperature))
        speed = ""
        if mine and plain and mine[1] > 0 and plain[0] > 0:
            speed = f" {(mine[0] / mine[1]) / (plain[0] / plain[1]):.2f}x"
        return f"{name} | {category} | T={temperature:g}{speed}"
