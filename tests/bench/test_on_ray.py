"""``leap bench --ray`` (leap.bench.on_ray) on a local Ray cluster: the same records as the serial run, a
worker killed mid-prompt loses and duplicates nothing, ``--resume`` after the driver died, and the CLI's
address form against a ``ray start --head`` cluster. One test function: one Ray cluster at a time on a
2-core machine (pytest-xdist would otherwise start two)."""

from __future__ import annotations

import collections
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from leap.bench.harness import Bench, BenchSettings  # noqa: E402
from leap.bench.on_ray import run_bench_on_ray  # noqa: E402
from leap.bench.records import read_records, record_key  # noqa: E402
from leap.core import load_model  # noqa: E402
from leap.core.errors import LeapError  # noqa: E402
from tests.tiny import save_tiny_model  # noqa: E402

ROWS = [{"question_id": 1, "category": "c1", "turns": ["w5 w6 w5 w6 w5"]},
        {"question_id": 2, "category": "c2", "turns": ["w7 w8 w7 w8", "w9 w7"]},
        {"question_id": 3, "category": "c1", "turns": ["w10 w11 w10 w11"]}]
SAME = ("token_ids", "new_tokens", "steps", "accept_lengths", "lossless", "status")  # all but the clocks


def _settings() -> BenchSettings:
    return BenchSettings(methods=["ar", "prompt-lookup", "suffix"], temperatures=[0.0, 1.0], max_new_tokens=8,
                         warmup=0, chat=False)


def _answers(folder) -> dict[tuple, dict]:
    """Each generation once; everything but the clocks for methods without cross-prompt state, and for
    ``suffix`` (which learns from every earlier prompt of its process, so a worker's share of the prompts
    changes its drafts) the greedy tokens only."""
    answers = [r for r in read_records(folder) if r.get("kind") == "answer"]
    keys = collections.Counter(record_key(r) for r in answers)
    assert max(keys.values()) == 1, f"duplicated generations: {[k for k, n in keys.items() if n > 1]}"
    out = {}
    for r in answers:
        if r["method"] != "suffix":
            out[record_key(r)] = {k: r.get(k) for k in SAME}
        elif r["temperature"] == 0:
            out[record_key(r)] = {"token_ids": r["token_ids"], "lossless": r["lossless"]}
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.heavy
def test_ray_bench_equals_the_serial_run_survives_a_lost_worker_and_resumes(tmp_path):
    folder = str(save_tiny_model(tmp_path / "tiny"))
    load = {"model": folder, "device": "cpu", "threads": 1}
    Bench(load_model(folder, device="cpu"), ROWS, _settings(), tmp_path / "serial", progress=False).run()
    serial = _answers(tmp_path / "serial")
    assert len(serial) == 4 * 2 * 2 + 4 and all(r.get("status", "ok") == "ok" for r in serial.values())

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        # prompt 2's first worker exits after 3 of its 12 generations: the prompt is run again elsewhere
        run_bench_on_ray(load, ROWS, _settings(), tmp_path / "ray", progress=False, _die={"2": 3})
        assert _answers(tmp_path / "ray") == serial
        workers = {r.get("worker") for r in read_records(tmp_path / "ray") if r.get("kind") == "answer"}
        assert workers and None not in workers
        meta = [r for r in read_records(tmp_path / "ray") if r.get("kind") == "meta"]
        assert meta[0]["ray"]["workers"] == 2 and meta[0]["model"]

        # the driver died after prompt 1: its records stay, --resume runs the rest once
        shutil.copytree(tmp_path / "ray", tmp_path / "cut")
        path = tmp_path / "cut" / "records.jsonl"
        kept = [line for line in path.read_text().splitlines()
                if json.loads(line).get("question_id", 1) == 1]
        path.write_text("\n".join(kept) + "\n")
        run_bench_on_ray(load, ROWS, _settings(), tmp_path / "cut", resume=True, progress=False)
        assert _answers(tmp_path / "cut") == serial

        # workers that cannot load the model: an error naming the model, not a Ray traceback
        with pytest.raises(LeapError, match="no-such-model"):
            run_bench_on_ray({**load, "model": str(tmp_path / "no-such-model")}, ROWS, _settings(),
                             tmp_path / "broken", progress=False)
    finally:
        ray.shutdown()

    # the CLI against an existing cluster, by address
    port = _free_port()
    env_ray = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    subprocess.run([env_ray, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                    "--disable-usage-stats"], check=True, capture_output=True, timeout=120)
    try:
        from leap.cli import main

        prompts = tmp_path / "prompts.jsonl"
        prompts.write_text(json.dumps(ROWS[0]) + "\n")
        assert main(["bench", "--model", folder, "--device", "cpu", "--no-chat", "--prompts", str(prompts),
                     "--methods", "prompt-lookup", "--temperature", "0,1", "--max-new-tokens", "8",
                     "--warmup", "0", "--out", str(tmp_path / "cli"), "--quiet", "--ray", f"127.0.0.1:{port}"]) == 0
        cli = _answers(tmp_path / "cli")
        assert cli == {k: v for k, v in serial.items() if k[0] == "1" and k[4] != "suffix"}
    finally:
        ray.shutdown()
        subprocess.run([env_ray, "stop", "--force"], capture_output=True, timeout=120)


def test_an_unreachable_cluster_address_is_refused_at_once_with_the_fix():
    """Issue 36: --ray HOST:PORT with nothing listening retried inside ray.init for a minute or more."""
    import socket
    import time

    from leap.bench.on_ray import check_address
    from leap.core.errors import SettingsError

    start = time.perf_counter()
    for address in ("127.0.0.1:1", "ray://127.0.0.1:1"):
        with pytest.raises(SettingsError, match="ray start --head --port=1"):
            check_address(address)
    with pytest.raises(SettingsError, match="HOST:PORT"):
        check_address("not-an-address")
    assert time.perf_counter() - start < 10
    check_address(None)
    check_address("auto")
    with socket.socket() as server:  # something listening: accepted
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_address(f"127.0.0.1:{server.getsockname()[1]}")
