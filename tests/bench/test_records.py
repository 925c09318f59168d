"""Benchmark records (leap.bench.records): a crash mid-write loses at most the record in flight, never a later one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from leap.bench.records import RECORDS_FILE, RecordFile, read_records


def test_resume_after_a_torn_write_keeps_the_next_record(tmp_path):
    """Issue 33: the first record written on resume was glued to the torn fragment and lost on reading back."""
    path = tmp_path / RECORDS_FILE
    path.write_text(json.dumps({"i": 0}) + "\n" + json.dumps({"i": 1}) + "\n" + '{"i": 2, "tok')
    file = RecordFile(tmp_path, resume=True)
    assert [r["i"] for r in file.records] == [0, 1]
    file.append({"i": 2})
    file.append({"i": 3})
    assert [r["i"] for r in read_records(tmp_path)] == [0, 1, 2, 3]
    assert (tmp_path / (RECORDS_FILE + ".torn")).read_text() == '{"i": 2, "tok\n'  # the fragment is kept aside


_WRITER = """
import sys
from leap.bench.records import RecordFile
file = RecordFile(sys.argv[1], resume=True)
i = len(file.records)
while True:
    file.append({"i": i, "payload": "x" * 200_000})
    i += 1
"""


def test_sigkill_mid_write_then_resume_loses_and_duplicates_nothing(tmp_path):
    for _ in range(2):  # killed twice, resumed twice
        child = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], env={**os.environ})
        deadline = time.time() + 60
        path = tmp_path / RECORDS_FILE
        while time.time() < deadline and (not path.exists() or path.stat().st_size < 3_000_000):
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait()
    file = RecordFile(tmp_path, resume=True)
    n = len(file.records)
    assert n > 0 and [r["i"] for r in file.records] == list(range(n))  # none lost between, none twice
    file.append({"i": n})
    assert [r["i"] for r in read_records(tmp_path)] == list(range(n + 1))
