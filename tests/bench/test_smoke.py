"""leap smoke on the tiny preset (what CI runs; docs/gpu.md has the GPU and 8B runs)."""

import json

import pytest
import torch

from leap.bench.smoke import PRESETS, SmokeSettings, build_random_model, run_smoke
from leap.cli import main


def test_smoke_tiny_cpu_json_every_path_ok(capsys):
    assert main(["smoke", "--device", "cpu", "--preset", "tiny", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"] == "cpu" and report["dtype"] == "float32"
    assert set(report["paths"]) == set(SmokeSettings().paths)
    assert all(status == "ok" for status in report["paths"].values()), report.get("tracebacks")
    assert report["identical"] is True
    assert set(report["outputs_identical"]) == {"fixed-config", "leap", "drafter", "select"}
    assert sorted(map(int, report["verify_curve"]))[:16] == list(range(1, 17))
    assert report["max_tree_nodes"] == max(map(int, report["verify_curve"])) - 1
    assert report["verify_curve"]["1"] == 1.0
    L = PRESETS["tiny"]["num_hidden_layers"]
    assert 0 in map(int, report["draft_cost"]) and max(map(int, report["draft_cost"])) == L - 1
    # at least the float32 weights were resident (a peak that misses the model is not a measurement)
    assert report["peak_memory_gib"] >= report["parameters_b"] * 1e9 * 4 / 2**30


def test_a_failing_path_is_reported_not_raised():
    report = run_smoke(SmokeSettings(paths=("plain", "no-such-path")))
    assert report["paths"]["plain"] == "ok"
    assert "unknown smoke path" in report["paths"]["no-such-path"]
    assert report["ok"] is False


def test_build_random_model_allocates_in_the_asked_dtype_and_shape():
    model = build_random_model("tiny", "cpu", torch.bfloat16, {"num_hidden_layers": 3})
    assert model.num_layers == 3
    assert {p.dtype for p in model.hf_model.parameters()} == {torch.bfloat16}
    # rotary frequencies rebuilt (to_empty leaves buffers uninitialised): equal to a fresh module's
    fresh = type(model.rotary_emb)(model.config)
    assert torch.equal(model.rotary_emb.inv_freq, fresh.inv_freq)


def test_unknown_preset_is_a_clear_error():
    from leap.core.errors import SettingsError

    with pytest.raises(SettingsError, match="llama3-8b"):
        build_random_model("gpt5", "cpu", torch.float32)
