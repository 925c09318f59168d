"""``leap doctor`` (leap.cli.doctor) and the tested set it checks against (leap/data/constraints.txt)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from packaging.requirements import Requirement

from leap.cli import doctor
from leap.cli.doctor import FAIL, OK, WARN, version_findings

ROOT = Path(__file__).resolve().parents[2]


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def test_a_version_other_than_the_tested_one_is_named_with_its_fix():
    tested = {"transformers": "5.24.0", "torch": "2.13.0", "pytest": "9.0.3"}
    found = version_findings({"transformers": "5.25.0", "torch": "2.13.0+cpu", "pytest": None}, tested)
    by = {f.message.split()[0]: f for f in found}
    assert set(by) == {"transformers", "pytest"}  # torch's local label (+cpu) is the tested version
    assert by["transformers"].status == WARN and "5.25.0" in by["transformers"].message
    assert "transformers==5.24.0" in by["transformers"].fix and "constraints.txt" in by["transformers"].fix
    assert by["pytest"].status == WARN  # an extra; a missing core dependency fails:
    assert version_findings({"transformers": None}, {"transformers": "5.24.0"})[0].status == FAIL
    assert version_findings({"torch": "2.13.0"}, {"torch": "2.13.0"})[0].status == OK


def test_the_tested_set_pins_every_dependency_inside_pyprojects_ranges():
    """The constraints file is what setup.sh installs: it must name every dependency and extra of pyproject, at a
    version pyproject allows (else setup.sh would install a set no library user can get)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    requirements += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    tested = doctor.tested_versions()
    for req in requirements:
        name = _norm(req.name)
        assert name in tested, f"{name} is not in leap/data/constraints.txt"
        assert req.specifier.contains(tested[name], prereleases=True), f"{name}=={tested[name]} outside {req}"


def test_setup_installs_with_the_constraints_and_fails_without_llama_cpp():
    setup = (ROOT / "setup.sh").read_text()
    installs = [line for line in setup.splitlines() if "pip install" in line]
    assert installs and all('-c "$CONSTRAINTS"' in line for line in installs), installs
    assert "exit 1" in setup.split("llama_cpp_minimal.cmake", 1)[1]  # a failed llama.cpp build stops set-up
    # llama.cpp without AMX (its matrix product segfaults, llama.cpp #20824), never from pip's source-keyed wheel cache
    assert "-DGGML_NATIVE=OFF" in setup and "AMX=ON" not in setup and "--no-cache-dir" in setup


def test_doctor_names_a_missing_llama_cpp_with_the_build_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    finding = doctor._llama_cpp()
    assert finding.status == FAIL and "torch int8" in finding.message
    assert "llama_cpp_minimal.cmake" in finding.fix


def _child(monkeypatch, returncode, stdout="", stderr=""):
    import subprocess

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(doctor.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, returncode, stdout, stderr))


def test_doctor_survives_a_llama_cpp_that_crashes_and_names_the_signal(monkeypatch):
    """An AMX build of llama.cpp segfaults on decode: doctor runs it in a child and reports that, with the fix."""
    _child(monkeypatch, -11)
    finding = doctor._llama_cpp()
    assert finding.status == FAIL and "crashed (signal 11)" in finding.message
    assert "setup.sh" in finding.fix


def test_doctor_reports_the_childs_last_error_line_and_an_amx_build(monkeypatch):
    _child(monkeypatch, 1, stderr="Traceback...\nSettingsError: llama.cpp could not load x.gguf\n")
    finding = doctor._llama_cpp()
    assert finding.status == FAIL and finding.message.endswith("could not load x.gguf")
    _child(monkeypatch, 0, stdout="0.3.36 49152 amx\n")
    finding = doctor._llama_cpp()
    assert finding.status == WARN and "AMX" in finding.message and "49152 logits" in finding.message
    _child(monkeypatch, 0, stdout="0.3.36 49152\n")
    assert doctor._llama_cpp().status == OK


def test_freeze_lists_the_installed_closure():
    import importlib.metadata as md

    try:
        md.distribution("leap")
    except md.PackageNotFoundError:  # e.g. a GPU machine running the checkout from PYTHONPATH
        pytest.skip("leap is not installed as a distribution here (setup.sh installs it): nothing to freeze")
    lines = doctor.freeze()
    assert f"transformers=={md.version('transformers')}" in lines
    assert not any(line.startswith("leap==") for line in lines)


def test_doctor_runs_and_reports(capsys):
    from leap.cli import main

    code = main(["doctor", "--quick"])
    out = capsys.readouterr().out
    assert "versions:" in out and "threads:" in out and "leap doctor:" in out
    assert code == (1 if "[FAIL]" in out else 0)


def test_doctor_names_the_linears_each_loaded_model_runs(monkeypatch, tmp_path):
    """What choose_linears measured and kept (load_model's verdict files) is reported per model, packed or stock."""
    from leap.core.modeling import fast_linear
    from tests.tiny import tiny_hf_model

    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    assert "not measured yet" in doctor._linears().message
    monkeypatch.setattr(fast_linear, "_CHOSEN", {})
    monkeypatch.setattr(fast_linear, "measure_linears", lambda hf, **k: {
        "packed": True, "seconds": {"packed": {1: 0.001, 9: 0.002}, "stock": {1: 0.003, 9: 0.004}}, "tokens": [1, 9]})
    fast_linear.choose_linears(tiny_hf_model(), name="SmolLM2-135M-Instruct")
    fast_linear.choose_linears(tiny_hf_model("qwen2"), name="tiny-qwen2")  # another model: counted, not listed
    finding = doctor._linears()
    assert finding.status == OK and "packed (oneDNN) at" in finding.message
    assert "3.0 ms packed against 7.0 ms stock" in finding.message and "1 other model(s)" in finding.message
