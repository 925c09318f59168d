"""``leap bench --ray [ADDRESS]``: the Spec-Bench harness spread over Ray actors.

The unit of work is one prompt: a :class:`BenchWorker` actor (one per GPU where there are GPUs, else one
per ``num_cpus``) loads the model once, and runs every temperature, run and method of the prompt
interleaved in its own process (:meth:`leap.bench.harness.Bench.run_row`), exactly as the serial run
does - so each speedup is still a ratio taken in one process, and the lossless check compares with
plain decoding run beside it. The prompt's records come back to the driver when the prompt is done
and are appended to ``OUT/records.jsonl`` at once, with the worker's host in each record.

Methods that learn across prompts (``suffix``, ``token-recycling``, a persistent agent such as SWIFT's)
learn in each worker from that worker's share of the prompts, so their per-prompt numbers can differ from
a serial run's (greedy outputs are identical either way). On one machine the workers share its cores or
GPUs: ratios stay same-process, but contention adds noise; give each worker its own GPU.

Failures: a worker that dies (a lost node, a crash, ``ray.kill``) loses its prompt in flight, never a
written record; the driver starts a new worker and gives the prompt to the next free one, from its
beginning (nothing of it was written, so nothing is duplicated), up to ``retries`` times per prompt.
``--resume`` after the driver died skips every finished generation, as in the serial run.

With no ``--ray`` nothing here is imported, and Ray is not needed (``pip install 'leap[ray]'``).
To use an existing cluster: ``ray start --head`` on one machine, ``ray start --address HEAD:6379`` on the
others, then ``leap bench ... --ray HEAD:6379`` (or ``--ray auto`` on a cluster node); every node needs
leap, the model (a path every node can read, or ``smollm2``'s wheel) and the same ``--import`` modules.

Who calls what: ``leap bench --ray`` (:mod:`leap.cli.bench`) calls :func:`run_bench_on_ray`.
"""

from __future__ import annotations

import collections
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from leap.bench.harness import Bench, BenchSettings, generations
from leap.bench.records import MemoryRecords, RecordFile, record_key, settings_conflict
from leap.core.errors import LeapError, SettingsError

__all__ = ["BenchWorker", "run_bench_on_ray", "check_address"]


def _ray():
    try:
        import ray
    except ImportError as err:
        raise SettingsError("leap bench --ray needs Ray: pip install 'leap[ray]' (or pip install ray)") from err
    return ray


class BenchWorker:
    """One Ray actor: the model loaded once, a :class:`Bench` over it, one prompt per call.

    ``load``: ``model`` (the name or path :func:`leap.core.load_model` takes) and its ``device``, ``dtype``,
    ``fast_linear``,
    plus ``threads`` and ``imports`` (modules that register agents, drafters or methods)."""

    def __init__(self, load: dict[str, Any], settings: BenchSettings, warm_row: dict) -> None:
        import importlib

        import torch

        from leap.core import load_model

        load = dict(load)
        for module in load.pop("imports", ()):
            importlib.import_module(module)
        threads = load.pop("threads", None)
        if threads:
            torch.set_num_threads(int(threads))
        self.model = load_model(load.pop("model"), **load)
        self.bench = Bench(self.model, [warm_row], settings, None, records=MemoryRecords(), progress=False)
        self.bench._warm_up()
        self.host = socket.gethostname()

    def meta_record(self, prompts: int) -> dict[str, Any]:
        """The driver's meta record, made where the model runs (:meth:`Bench.meta_record`)."""
        return self.bench.meta_record(prompts)

    def run_row(self, row: dict, prior: list[dict], die_after: int | None = None) -> list[dict]:
        """Every generation of ``row`` not in ``prior`` (the row's records the driver holds); returns the new
        records. ``die_after``: exit the process after that many new records (tests of worker loss)."""
        records = MemoryRecords(prior)
        if die_after is not None:
            append = records.append

            def dying(rec: dict) -> None:
                append(rec)
                if len(records.records) - len(prior) >= die_after:
                    os._exit(1)

            records.append = dying  # type: ignore[method-assign]
        self.bench.file = records
        self.bench.run_row(row, records.done())
        return [{**rec, "worker": self.host} for rec in records.records[len(prior):]]


def _resources(ray, load: dict[str, Any], gpus_per_worker: float | None, cpus_per_worker: float | None,
               workers: int | None) -> tuple[dict[str, float], int]:
    """Each actor's resources and how many actors: one GPU each where the model goes to a GPU, else
    ``cpus_per_worker`` CPUs (default: ``--threads`` or 1)."""
    total = ray.cluster_resources()
    device = str(load.get("device") or "auto")
    wants_gpu = device.startswith("cuda") or (device == "auto" and total.get("GPU", 0) >= 1)
    if gpus_per_worker or wants_gpu:
        per = {"num_gpus": float(gpus_per_worker or 1), "num_cpus": float(cpus_per_worker or 1)}
        n = int(total.get("GPU", 0) // per["num_gpus"])
    else:
        per = {"num_cpus": float(cpus_per_worker or load.get("threads") or 1)}
        n = int(total.get("CPU", 1) // per["num_cpus"])
    n = workers or max(n, 1)
    return per, n


def check_address(address: str | None, timeout_s: float = 3.0) -> None:
    """Refuse a cluster address nothing listens on, in seconds and with the fix, before ``ray.init`` (which
    retries an unreachable address for a minute or more). ``None`` (a local instance) and ``auto`` (Ray's own
    lookup) are left to Ray; ``HOST:PORT`` and ``ray://HOST:PORT`` are probed with one TCP connection."""
    import socket

    if address in (None, "", "local", "auto"):
        return
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise SettingsError(f"--ray {address}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as err:
        raise SettingsError(f"--ray {address}: no Ray cluster answers there ({err.strerror or err}); start one with "
                            f"`ray start --head --port={port}` on {host}, or give --ray with no address for a local "
                            "instance") from None


def run_bench_on_ray(load: dict[str, Any], rows: Sequence[dict], settings: BenchSettings, out: str | Path, *,
                     resume: bool = False, address: str | None = None, workers: int | None = None,
                     gpus_per_worker: float | None = None, cpus_per_worker: float | None = None,
                     retries: int = 3, progress: bool = True,
                     _die: dict[str, int] | None = None) -> RecordFile:
    """The serial harness's records, made by Ray actors (see the module docstring). ``address``: ``None``
    starts a local Ray instance (or uses the one this process already has), else an existing cluster's
    address (``auto``, ``HOST:PORT``, ``ray://HOST:10001``). ``_die``: ``{question_id: n}`` makes that
    prompt's first worker exit after ``n`` records (tests)."""
    from tqdm import tqdm

    ray = _ray()
    if not rows:
        raise SettingsError("no prompts selected; check --prompts / --categories / --num-prompts")
    if not ray.is_initialized():
        check_address(address)
    file = RecordFile(out, resume=resume)
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    per, n = _resources(ray, load, gpus_per_worker, cpus_per_worker, workers)
    actor = ray.remote(**per)(BenchWorker)
    rows = list(rows)

    def start():
        return actor.remote(load, settings, rows[0])

    idle = [start() for _ in range(min(n, len(rows)))]
    try:
        meta = ray.get(idle[0].meta_record.remote(len(rows)))
    except ray.exceptions.RayActorError as err:  # e.g. the model is not where a node looks for it
        for worker in idle:
            ray.kill(worker, no_restart=True)
        raise LeapError(f"leap bench --ray: a worker could not start (every node needs leap, the model "
                        f"{load.get('model')!r} at that path and the --import modules): {err}") from None
    conflict = settings_conflict([*file.records, meta])
    if conflict:
        for worker in idle:
            ray.kill(worker, no_restart=True)
        raise SettingsError(f"--resume with other settings than the records' ({conflict}, records first): resume "
                            "with the records' settings, or choose another --out folder")
    file.append({**meta, "ray": {"address": address or "local", "workers": len(idle), "per_worker": per}})
    done = file.done()
    queue = collections.deque(rows)
    tries: collections.Counter[str] = collections.Counter()
    running: dict[Any, tuple[Any, dict]] = {}
    with tqdm(total=generations(rows, settings), desc="leap bench (ray)", disable=not progress, dynamic_ncols=True) as bar:
        while queue or running:
            while queue and idle:
                row = queue.popleft()
                qid = str(row["question_id"])
                prior = [r for r in file.records if r.get("kind") == "answer" and str(r.get("question_id")) == qid]
                die = (_die or {}).get(qid) if tries[qid] == 0 else None
                worker = idle.pop()
                running[worker.run_row.remote(row, prior, die)] = (worker, row)
            ready, _ = ray.wait(list(running), num_returns=1)
            worker, row = running.pop(ready[0])
            qid = str(row["question_id"])
            try:
                new = ray.get(ready[0])
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as err:
                tries[qid] += 1
                if tries[qid] > retries:
                    raise RuntimeError(f"prompt {qid} lost its worker {tries[qid]} times; last: {err}") from err
                ray.kill(worker, no_restart=True)
                idle.append(start())  # a fresh worker; the prompt starts over (none of it was written)
                queue.appendleft(row)
                continue
            fresh = [r for r in new if record_key(r) not in done]
            file.extend(fresh)
            done.update(record_key(r) for r in fresh if r.get("status") == "ok")
            bar.update(generations([row], settings))
            idle.append(worker)
    return file
