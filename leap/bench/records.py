"""The benchmark's JSONL records: one line per prompt, turn, temperature, run and method.

Records are appended (and flushed) as soon as a generation finishes, so a crash or Ctrl-C loses at
most the generation in flight, and ``leap bench --resume`` skips every key already written. Fields
follow Spec-Bench's answer format (``question_id``, ``category``, ``turn``, ``new_tokens``,
``wall_time_s``, ``accept_lengths``) plus leap's: ``method``, ``temperature``, ``run``, ``steps``,
``config``, ``status`` (``ok`` / ``failed`` with ``error``), and for greedy runs ``lossless`` (the
tokens equal plain decoding's) and ``first_mismatch`` (the first differing position, or None).

Who calls what: :class:`leap.bench.harness.Bench` writes with :class:`RecordFile`;
:mod:`leap.bench.report` reads with :func:`read_records`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["settings_conflict", "RESULT_SETTINGS", "MACHINE_SETTINGS", "RecordFile", "MemoryRecords", "read_records", "record_key", "RECORDS_FILE"]

RECORDS_FILE = "records.jsonl"


def record_key(rec: dict[str, Any]) -> tuple:
    """What identifies a generation: (question, turn, temperature, run, method)."""
    return (str(rec["question_id"]), int(rec["turn"]), float(rec["temperature"]), int(rec["run"]), rec["method"])


#: the fields every answer record has, and those an ``ok`` one adds: what :mod:`leap.bench.report` reads
ANSWER_FIELDS = ("question_id", "category", "turn", "temperature", "run", "method", "status")
OK_FIELDS = ("new_tokens", "wall_time_s")


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a results folder (or a JSONL file).

    Only a torn *last* line is expected (a run killed mid-write) and skipped, with a note on stderr. A damaged line
    anywhere else, or an answer record without a field the report needs, raises a :class:`LeapError` naming the
    line: dropping it silently would change every figure of its category (5/5 at 0.93x read as 4/4 at 0.91x)."""
    from leap.core.errors import LeapError

    path = Path(path)
    if path.is_dir():
        path = path / RECORDS_FILE
    if not path.is_file():
        raise LeapError(f"no benchmark records at {path}; run `leap bench --out DIR` first")
    lines = path.read_text(encoding="utf-8").splitlines()
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    out = []
    for i, line in enumerate(lines):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError("not a JSON object")
        except ValueError as err:
            if i == last:  # a run killed mid-write
                print(f"leap: {path} line {i + 1} is torn (a run killed mid-write); skipped", file=sys.stderr)
                continue
            raise LeapError(f"{path} line {i + 1} is damaged ({err}); only a torn last line is expected. Delete or "
                            "repair that line (its generation is then rerun by `leap bench --resume`)") from None
        if rec.get("kind") == "answer":
            missing = [k for k in ANSWER_FIELDS + (OK_FIELDS if rec.get("status") == "ok" else ()) if k not in rec]
            if missing:
                raise LeapError(f"{path} line {i + 1}: an answer record without {', '.join(missing)}; records are "
                                "written by `leap bench` - delete or repair that line")
        out.append(rec)
    return out


class MemoryRecords:
    """Records held in memory, with :class:`RecordFile`'s reading side: what a Ray worker fills for one prompt
    (seeded with that prompt's earlier records on ``--resume``) and returns to the driver's file."""

    def __init__(self, records: Iterable[dict[str, Any]] = ()) -> None:
        self.records = list(records)

    def done(self) -> set[tuple]:
        """Keys of finished generations (failed ones are retried on resume)."""
        return {record_key(r) for r in self.records if r.get("kind") == "answer" and r.get("status") == "ok"}

    def find(self, **match: Any) -> dict[str, Any] | None:
        """The last ``ok`` answer record whose fields equal ``match``."""
        for rec in reversed(self.records):
            if rec.get("kind") == "answer" and rec.get("status") == "ok" and all(
                    rec.get(k) == v for k, v in match.items()):
                return rec
        return None

    def append(self, rec: dict[str, Any]) -> None:
        self.records.append(rec)

    def extend(self, recs: Iterable[dict[str, Any]]) -> None:
        for rec in recs:
            self.append(rec)


class RecordFile(MemoryRecords):
    """Append-only JSONL of one benchmark folder."""

    def __init__(self, folder: str | Path, *, resume: bool) -> None:
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            from leap.core.errors import SettingsError

            raise SettingsError(f"--out {self.folder} is a file; give a folder for the results (records.jsonl)")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / RECORDS_FILE
        if self.path.exists() and not resume and self.path.stat().st_size:
            from leap.core.errors import SettingsError

            raise SettingsError(f"{self.path} already holds results; pass --resume to continue that run, "
                                "or choose another --out folder")
        if self.path.exists():
            _cut_torn_tail(self.path)
        super().__init__(read_records(self.path) if self.path.exists() else [])

    def append(self, rec: dict[str, Any]) -> None:
        """One whole line, flushed and synced: a crash or SIGKILL leaves at most a torn last line, which the next
        open cuts off (:func:`_cut_torn_tail`) before anything is appended after it."""
        self.records.append(rec)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _cut_torn_tail(path: Path) -> None:
    """A file that does not end in a newline was torn by a crash mid-write: move the fragment after the last
    newline to ``PATH.torn`` (kept, never silently dropped) and truncate, so the next record starts a line of its
    own instead of being glued to the fragment (and lost with it when the file is read back)."""
    with path.open("rb+") as f:
        data = f.read()
        if not data or data.endswith(b"\n"):
            return
        keep = data.rfind(b"\n") + 1
        with path.with_name(path.name + ".torn").open("ab") as torn:
            torn.write(data[keep:] + b"\n")
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())


#: the settings a record's result depends on: records that differ in any of them are not one experiment
RESULT_SETTINGS = ("max_new_tokens", "temperatures", "chat", "seed", "runs", "options", "method_args", "batch_size")

#: the fields of a meta record's ``machine`` that times depend on: a run resumed on another device, in another dtype,
#: with other threads, linears or layer path measures another experiment (a field an older record lacks is skipped)
MACHINE_SETTINGS = ("device", "dtype", "cuda", "torch_threads", "onednn_linears", "layer_call", "engine")


def settings_conflict(metas: Iterable[dict[str, Any]]) -> str | None:
    """The first result setting (or the model) on which these meta records differ, as ``"field: a vs b"``;
    None when they agree. Methods may differ: a run resumed with one more method is still one experiment."""
    metas = [m for m in metas if m.get("kind") == "meta"]
    if not metas:
        return None
    first = metas[0]
    for meta in metas[1:]:
        if meta.get("model") != first.get("model"):
            return f"model: {first.get('model')} vs {meta.get('model')}"
        for key in RESULT_SETTINGS:
            a, b = first.get("settings", {}).get(key), meta.get("settings", {}).get(key)
            if a != b:
                return f"{key}: {json.dumps(a)} vs {json.dumps(b)}"
        mine, theirs = first.get("machine", {}), meta.get("machine", {})
        for key in MACHINE_SETTINGS:
            a, b = mine.get(key), theirs.get(key)
            if key in mine and key in theirs and a != b:
                return f"machine {key}: {json.dumps(a)} vs {json.dumps(b)}"
    return None
