from __future__ import annotations

import json

import pytest

from leap.cli import main
from tests.tiny import save_tiny_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(save_tiny_model(tmp_path_factory.mktemp("red") / "tiny", eos_token_id=None))


def test_redundancy_json_report(model_dir, capsys):
    rc = main(["redundancy", "--model", model_dir, "--per-category", "1", "--categories", "qa,translation",
               "--json", "--observation1", "--steps", "2,4"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["num_layers"] == 6 and data["prompts"] == 2
    assert set(data["metrics"]) == {"residual-ratio", "ear-gain", "cosine", "attention-entropy"}
    assert all(len(v) == 6 for v in data["metrics"].values())
    assert set(data["zones"]) <= {"early", "middle", "final"} and len(data["zones"]) == 6
    assert [l for g in data["groups"] for l in g] == list(range(6))
    assert set(data["by_category"]) == {"qa", "translation"}
    # Observation 1 recomputed directly: Spearman rho of each metric at prefill vs after s decoded tokens,
    # averaged over the two prompts (one per category)
    from scipy import stats

    from leap.core import SelfSpecDecoder, load_model
    from leap.core.modeling.trace import capture_trace
    from leap.data import load_prompts, pick_per_category
    from leap.redundancy.analysis import prompt_ids
    from leap.redundancy.base import compute_metrics

    model = load_model(model_dir)
    expected = {}
    for row in pick_per_category(load_prompts(), 1, ["qa", "translation"]):
        ids = prompt_ids(model, row, True)
        new = SelfSpecDecoder(model, None).generate(ids, max_new_tokens=4).token_ids
        before = compute_metrics(capture_trace(model, ids, 8))
        for s in (2, 4):
            after = compute_metrics(capture_trace(model, ids + new[:s], 8))
            for name in before:
                expected.setdefault(name, {}).setdefault(str(s), []).append(
                    stats.spearmanr(before[name], after[name]).statistic)
    for name, by_step in data["observation1"]["overall"].items():
        assert set(by_step) == {"2", "4"}
        for s, value in by_step.items():
            assert value == pytest.approx(sum(expected[name][s]) / 2, abs=1e-9)


def test_redundancy_plots_and_text(model_dir, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    rc = main(["redundancy", "--model", model_dir, "--per-category", "1", "--categories", "qa",
               "--plot", str(tmp_path), "--steps", "2"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "groups:" in out and "search space:" in out and "Observation 1" in out
    for name in ("metrics.png", "observation1.png", "redundancy.json"):
        assert (tmp_path / name).stat().st_size > 1000


def test_metrics_lists_every_metric(capsys):
    assert main(["metrics"]) == 0
    out = capsys.readouterr().out
    for name in ("residual-ratio", "ear-gain", "cosine", "attention-entropy"):
        assert name in out


def test_bad_prompt_file(tmp_path, model_dir, capsys):
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"category": "x"}\n')
    assert main(["redundancy", "--model", model_dir, "--prompts", str(bad), "--json"]) == 2
    assert "needs question_id, category and non-empty turns" in capsys.readouterr().err
    assert main(["redundancy", "--model", model_dir, "--prompts", str(tmp_path / "none.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_an_imported_metric_drives_the_zones(model_dir, capsys):
    """--import registers a metric defined in a test module; --zone-metric puts it in LEAP's R role."""
    from leap.redundancy.base import redundancy_metrics

    try:
        rc = main(["redundancy", "--model", model_dir, "--per-category", "1", "--categories", "qa", "--json",
                   "--import", "tests.redundancy.plugin_metric", "--zone-metric", "test-layer-index",
                   "--metric-arg", "test-layer-index:scale=2.0"])
        assert rc == 0
        data = json.loads(capsys.readouterr().out)
        assert data["metrics"]["test-layer-index"] == [2.0 * i for i in range(6)]  # its constructor argument
        assert data["zone_metric"] == "test-layer-index" and data["group_metric"] == "ear-gain"
        assert data["zones"][:3] == ["early"] * 3 and data["zones"][-2:] == ["final"] * 2
    finally:
        redundancy_metrics.remove("test-layer-index")
    assert main(["redundancy", "--model", model_dir, "--zone-metric", "no-such-metric"]) == 2
