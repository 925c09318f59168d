"""Benchmark records (leap.bench.records): a crash mid-write loses at most the record in flight, never a later one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from leap.bench.records import RECORDS_FILE, RecordFile, read_records
from leap.core.errors import LeapError


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


def _answer(i: int, **kw) -> dict:
    return {"kind": "answer", "question_id": f"q{i}", "category": "c", "turn": 0, "temperature": 0.0, "run": 0,
            "method": "ar", "status": "ok", "new_tokens": 4, "wall_time_s": 0.1, **kw}


def test_a_damaged_line_before_the_last_is_named_never_dropped(tmp_path):
    """Issue 54: one damaged middle line turned 5/5 at 0.93x into 4/4 at 0.91x without a word."""
    lines = [json.dumps(_answer(i)) for i in range(5)]
    lines[2] = lines[2][:30]
    (tmp_path / RECORDS_FILE).write_text("\n".join(lines) + "\n")
    with pytest.raises(LeapError, match=r"line 3 is damaged.*only a torn last line"):
        read_records(tmp_path)


def test_a_torn_last_line_is_skipped_and_said(tmp_path, capsys):
    lines = [json.dumps(_answer(i)) for i in range(3)]
    (tmp_path / RECORDS_FILE).write_text("\n".join(lines) + "\n" + lines[0][:25] + "\n\n")
    assert len(read_records(tmp_path)) == 3
    assert "line 4 is torn" in capsys.readouterr().err


@pytest.mark.parametrize("field", ["category", "wall_time_s", "new_tokens", "question_id", "method"])
def test_an_answer_without_a_field_the_report_reads_is_named(tmp_path, field):
    """Issue 54: a record without ``category`` or ``wall_time_s`` gave a KeyError traceback from ``leap report``."""
    recs = [_answer(0), _answer(1)]
    del recs[1][field]
    (tmp_path / RECORDS_FILE).write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(LeapError, match=f"line 2: an answer record without {field}"):
        read_records(tmp_path)
    failed = {k: v for k, v in _answer(2, status="failed").items() if k not in ("new_tokens", "wall_time_s")}
    (tmp_path / RECORDS_FILE).write_text(json.dumps(failed) + "\n")
    assert read_records(tmp_path) == [failed]  # a failed record has no times
