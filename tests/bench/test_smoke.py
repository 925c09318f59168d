"""leap smoke on the tiny preset (what CI runs; the GPU and 8B runs: experiments/2026-11-26-gpu-notebook)."""

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


def test_batch_path_holds_every_row_to_decoding_it_alone():
    report = run_smoke(SmokeSettings(paths=("plain", "batch"), batch_size=3, max_new_tokens=12))
    assert report["paths"]["batch"] == "ok", report.get("tracebacks")
    assert report["batch_size"] == 3
    assert {k: len(v) for k, v in report["batch_rows_identical"].items()} == {"batch-plain": 3, "batch-suffix": 3}
    assert all(all(rows) for rows in report["batch_rows_identical"].values())
    assert report["tokens_per_s"]["batch-plain"] > 0 and report["tokens_per_s"]["batch-suffix"] > 0


def test_a_batch_row_that_differs_fails_the_identity(monkeypatch):
    """The batch rows count in ``identical``: a row that leaves its single-request output is caught."""
    from leap.core.decoding import batch as batch_module

    real = batch_module.BatchDecoder.generate

    def off_by_one(self, prompts, **kw):
        outcome = real(self, prompts, **kw)
        if kw.get("max_new_tokens", 0) > 4:
            outcome.rows[-1].token_ids[-1] += 1
        return outcome

    monkeypatch.setattr(batch_module.BatchDecoder, "generate", off_by_one)
    report = run_smoke(SmokeSettings(paths=("plain", "batch"), batch_size=2, max_new_tokens=8))
    assert report["batch_rows_identical"]["batch-plain"] == [True, False]
    assert report["identical"] is False and report["identity_rate"] < 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_smoke_tiny_cuda_float32_every_path_ok_and_identical():
    """docs/gpu.md's device-safety promise on CUDA: every path runs, float32 greedy output is identical
    (single requests and every batch row), the peak memory is read from the device."""
    report = run_smoke(SmokeSettings(device="cuda", max_new_tokens=24))
    assert report["device"].startswith("cuda")
    assert all(status == "ok" for status in report["paths"].values()), report.get("tracebacks")
    assert report["identical"] is True, (report["outputs_identical"], report.get("batch_rows_identical"))
    assert report["peak_memory_gib"] >= report["parameters_b"] * 1e9 * 4 / 2**30
