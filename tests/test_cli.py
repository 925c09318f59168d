from __future__ import annotations

import json

import pytest
import torch

from leap.cli import main
from tests.tiny import save_tiny_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(save_tiny_model(tmp_path_factory.mktemp("cli") / "tiny"))


def test_generate_json_has_the_documented_keys(model_dir, capsys):
    rc = main(["generate", "w5 w6 w7", "--model", model_dir, "--no-chat", "--skip", "2,3",
               "--max-new-tokens", "10", "--json", "--compare"])
    assert rc == 0
    record = json.loads(capsys.readouterr().out)
    for key in ("text", "token_ids", "new_tokens", "wall_time_s", "mean_accepted", "steps"):
        assert key in record
    assert record["config"] == "EESSEE" and record["identical_to_plain"] is True
    # --compare: warm-up, then 3 rounds alternating which goes first; the median of the rounds' ratios
    assert record["order"] == ["warmup:plain", "warmup:method", "plain", "method", "method", "plain", "plain",
                               "method"]
    rounds = sorted(record["speedup_rounds"])
    assert len(rounds) == 3 and record["speedup"] == rounds[1]
    assert record["speedup_low"] == rounds[0] and record["speedup_high"] == rounds[2]
    # a figure quoted from this record needs the commit and versions that produced it
    from leap.core.runtime.provenance import git_commit

    assert record["provenance"]["commit"] == git_commit()
    assert record["provenance"]["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")  # --device auto


def test_generate_plain_and_policy_args(model_dir, capsys):
    assert main(["generate", "w5", "--model", model_dir, "--no-chat", "--method", "ar", "--max-new-tokens", "4"]) == 0
    assert main(["generate", "w5", "--model", model_dir, "--no-chat", "--config", "EERREE",
                 "--draft-policy", "fixed", "--policy-arg", "k=2", "--max-new-tokens", "4"]) == 0
    err = capsys.readouterr().err
    assert "plain decoding" in err and "EERREE" in err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--skip", "0-5"], "skips every layer"),
        (["--config", "EEE"], "has 3 actions but the model has 6"),
        (["--temperature", "-1"], "temperature must be"),
        (["--draft-policy", "nope", "--skip", "1"], "unknown draft policy 'nope'; registered: adaedl"),
        (["--max-new-tokens", "1000"], "shorten the prompt"),
        (["--chat"], "no chat template"),
        (["--drafter", "stand", "--tree-verify", "nope"], "unknown tree verification rule 'nope'"),
        # issue 36: settings checked against the declared signature before the model loads, in one line
        (["--drafter", "lowbit", "--drafter-arg", "num_tokens=six"], "drafter 'lowbit': num_tokens must be an integer"),
        (["--drafter", "lowbit", "--drafter-arg", "num_token=6"], "drafter 'lowbit' has no setting 'num_token'"),
    ],
)
def test_bad_inputs_exit_2_with_a_message(model_dir, capsys, extra, message):
    chat = [] if "--chat" in extra else ["--no-chat"]
    assert main(["generate", "w5", "--model", model_dir, *chat, *extra]) == 2
    assert message in capsys.readouterr().err


def test_tree_verify_runs_sampled_stand_trees(model_dir, capsys, monkeypatch):
    from leap.core.verify.traversal import TraversalVerification

    calls = []
    real = TraversalVerification.accept_sampled
    monkeypatch.setattr(TraversalVerification, "accept_sampled",
                        lambda self, *a: calls.append(1) or real(self, *a))
    assert main(["generate", "w5 w6 w5 w6", "--model", model_dir, "--no-chat", "--drafter", "stand",
                 "--drafter-arg", "shape=best-first", "--tree-verify", "traversal", "--temperature", "1",
                 "--max-new-tokens", "24", "--seed", "0", "--json"]) == 0  # 12 tokens: too little to draft
    record = json.loads(capsys.readouterr().out)
    assert record["draft_tokens_proposed"] > 0
    assert record["new_tokens"] > 0 and record["config"] == "drafter:stand" and record["temperature"] == 1.0
    assert calls  # the rule named on the command line verified the trees


def test_missing_model(capsys, tmp_path):
    assert main(["generate", "hi", "--model", str(tmp_path / "x.gguf")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_policies_lists_registered(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    assert "adaedl" in out and "fixed" in out


def test_bench_then_report(model_dir, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"question_id": 1, "category": "c1", "turns": ["w5 w6 w5 w6"]}\n'
                       '{"question_id": 2, "category": "c2", "turns": ["w7 w8 w7 w8", "w9"]}\n')
    out = tmp_path / "bench"
    assert main(["bench", "--model", model_dir, "--no-chat", "--prompts", str(prompts), "--methods",
                 "prompt-lookup,hf-pld", "--method-arg", "hf-pld:num_tokens=3", "--max-new-tokens", "8",
                 "--out", str(out), "--quiet", "--warmup", "0"]) == 0
    assert "| prompt-lookup |" in capsys.readouterr().out
    assert main(["report", str(out), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("method,category,temperature,prompts,generations,mean_accepted,speedup,lossless")
    assert any(line.startswith("hf-pld,overall,0.0,2,3,") and ",3/3," in line for line in lines)
    assert main(["report", str(out), "--plot"]) == 0
    assert "Table 2" in capsys.readouterr().out and (out / "speedup_T0.png").is_file()
    # --baseline: every method over another of the run (the baseline itself at 1.00x), or the missing one named
    assert main(["report", str(out), "--baseline", "hf-pld"]) == 0
    report = capsys.readouterr().out
    assert "over `hf-pld`" in report and "| 1.00x | 1.00x |" in next(
        line for line in report.splitlines() if line.startswith("| hf-pld |"))
    with pytest.raises(SystemExit, match="no 'lowbit' generations"):
        main(["report", str(out), "--baseline", "lowbit"])
    # an existing folder without --resume is refused with the fix named
    assert main(["bench", "--model", model_dir, "--no-chat", "--prompts", str(prompts), "--out", str(out),
                 "--quiet"]) == 2
    assert "--resume" in capsys.readouterr().err


def test_calibrate_prints_and_caches_the_costs(model_dir, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    assert main(["calibrate", "--model", model_dir, "--json"]) == 0
    costs = json.loads(capsys.readouterr().out)
    assert sorted(map(int, costs["verify_curve"]))[:16] == list(range(1, 17)) and costs["step_s"] > 0
    assert costs["key"]["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")  # --device auto
    assert costs["layer_cost"] >= 0
    assert len(list((tmp_path / "calibration").glob("*.json"))) == 1  # cached for the next use
    assert main(["calibrate", "--model", model_dir]) == 0
    out = capsys.readouterr().out
    assert "verification c(k)" in out and "per layer pass" in out and "trees planned up to" in out
    assert "rows:" not in out  # batch sizes only when asked (or on first batched use)
    assert main(["calibrate", "--model", model_dir, "--batch-sizes", "2,4"]) == 0
    out = capsys.readouterr().out
    assert "2 rows: one token a row costs" in out and "4 rows:" in out and "in plain steps of 4 rows: 1:" in out
    assert main(["calibrate", "--model", model_dir, "--batch-sizes", "two"]) == 2
    assert "--batch-sizes" in capsys.readouterr().err


def test_compare_rounds_start_from_the_memory_as_it_was_and_it_learns_once(model_dir, capsys, tmp_path,
                                                                          monkeypatch):
    """`leap generate --compare` runs the search in a warm-up and three timed rounds on one prompt: each round must
    start from the memory as it was before the command (else the rounds that are timed search with what the
    warm-up learnt on this very prompt), and the memory learns this request once, not four times."""
    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    args = ["generate", "w5 w6 w7 w5 w6 w7 w5", "--model", model_dir, "--no-chat", "--drafters",
            "prompt-lookup;suffix", "--max-new-tokens", "16", "--json", "--compare", "--repeats", "3"]
    assert main(args) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["identical_to_plain"] is True
    files = list((tmp_path / "search_memory").glob("*.json"))
    assert len(files) == 1
    stats = json.loads(files[0].read_text())["options"]
    assert stats and all(entry["requests"] == 1 for entry in stats.values()), stats


def test_an_empty_memory_starts_from_the_shipped_prior_unless_no_prior(model_dir, capsys, tmp_path, monkeypatch):
    """The record names the memory the search started from; --no-prior is the ablation (a flag, not a code edit)."""
    from leap.search.memory import store as memory_module

    monkeypatch.setattr(memory_module, "PRIOR_DIR", tmp_path / "priors")
    (tmp_path / "priors").mkdir()
    (tmp_path / "priors" / "tiny.json").write_text(json.dumps(
        {"device_type": "cpu", "dtype": "float32", "options": {"suffix": {"requests": 9, "mean": 1.5}}}))
    args = ["generate", "w5 w6 w7 w5 w6 w7 w5", "--model", model_dir, "--no-chat", "--drafters",
            "prompt-lookup;suffix", "--max-new-tokens", "8", "--json", "--device", "cpu"]  # the prior's device
    for flags, started in (([], "shipped prior"), (["--no-prior"], "0 options remembered")):
        monkeypatch.setenv("LEAP_CACHE", str(tmp_path / "cache" / str(len(flags))))
        assert main(args + flags) == 0
        assert started in json.loads(capsys.readouterr().out)["search_memory_at_start"]


@pytest.mark.parametrize("method", ["optuna-tpe", "nevergrad-ngopt"])
def test_generate_searches_with_the_external_optimizers(model_dir, capsys, method):
    """Issue 21's "done when": `leap generate --method optuna-tpe` (and Nevergrad's, when installed) search
    the prompt's layer space and stay lossless."""
    from leap.search import search_agents

    if method not in search_agents:
        pytest.skip("pip install leap[nevergrad]")
    rc = main(["generate", "w5 w6 w7 w5 w6", "--model", model_dir, "--no-chat", "--method", method,
               "--max-new-tokens", "24", "--json", "--compare", "--loss-budget", "0"])
    assert rc == 0
    record = json.loads(capsys.readouterr().out)
    assert record["identical_to_plain"] is True and record["method"] == method
    assert record["search_iterations"] >= 1 and len(record["trials"]) == record["search_iterations"]
    # issue 36: the record names what drew the space, so the ablation can be rerun
    space = record["search_space"]
    assert space["zone_metric"] == "residual-ratio" and space["group_metric"] == "ear-gain" and space["zones_on"]
    assert len(space["zones"]) == 6 and set(space["zones"]) <= set("EMF") and space["zones"][0] == "E"
    assert sorted(layer for group in space["groups"] for layer in group) == list(range(6))


def test_sweep_runs_every_agent_metric_and_seed_through_the_harness(model_dir, tmp_path, capsys):
    from leap.bench.records import read_records

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"question_id": 1, "category": "c1", "turns": ["w5 w6 w5 w6 w7 w8"]}\n')
    out = tmp_path / "sweep"
    assert main(["sweep", "--model", model_dir, "--no-chat", "--prompts", str(prompts), "--agents", "random,ucb",
                 "--group-metrics", "ear-gain,cosine", "--seeds", "0,1", "--reward", "cost", "--budget", "6",
                 "--max-new-tokens", "12", "--warmup", "0", "--out", str(out), "--quiet"]) == 0
    answers = {r["method"]: r for r in read_records(out) if r.get("kind") == "answer"}
    # both metrics in every label, the zone metric too though only one is swept (issue 36)
    labels = {f"{a}/{m}/residual-ratio/s{s}" for a in ("random", "ucb") for m in ("ear-gain", "cosine") for s in (0, 1)}
    assert set(answers) == labels | {"ar"}
    assert all(answers[label]["lossless"] for label in labels)
    # the seed reaches the agent: random search with two seeds tries different configurations
    assert answers["random/ear-gain/residual-ratio/s0"]["trial_configs"] != \
        answers["random/ear-gain/residual-ratio/s1"]["trial_configs"]
    assert "| random/cosine/residual-ratio/s1 |" in capsys.readouterr().out
    assert main(["sweep", "--model", model_dir, "--agents", "random", "--group-metrics", "no-such-metric",
                 "--out", str(tmp_path / "x")]) == 2
    assert "no-such-metric" in capsys.readouterr().err


def test_bad_files_are_one_line_errors_naming_the_fix(model_dir, tmp_path, capsys, tiny_llama):
    """Issue 36: a non-UTF-8 --prompts file, --out naming a file, a truncated head file: named errors, no traceback."""
    from leap.core.errors import SettingsError
    from leap.heads.head import load_head

    latin = tmp_path / "prompts.jsonl"
    latin.write_bytes('{"question_id": 1, "category": "x", "turns": ["caf\xe9"]}\n'.encode("latin-1"))
    assert main(["bench", "--model", model_dir, "--prompts", str(latin), "--methods", "ar", "--out",
                 str(tmp_path / "o")]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    taken = tmp_path / "a-file"
    taken.write_text("x")
    assert main(["bench", "--model", model_dir, "--methods", "ar", "--num-prompts", "1", "--out", str(taken)]) == 2
    assert "is a file" in capsys.readouterr().err
    head = tmp_path / "head.safetensors"
    head.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":")  # torn: the header says 16 bytes, 5 follow
    with pytest.raises(SettingsError, match="truncated or not safetensors"):
        load_head(tiny_llama, head)


def test_bad_models_prompts_and_imports_are_one_line_errors(model_dir, tmp_path, capsys, monkeypatch):
    """Issue 54: each of these gave a traceback, or ran on silently (a string ``turns`` ran one turn per character)."""
    fake = tmp_path / "fake.gguf"
    fake.write_text("not a model")
    assert main(["generate", "hi", "--model", str(fake)]) == 2
    assert "is not a GGUF file" in capsys.readouterr().err
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    assert main(["generate", "hi", "--model", str(notes)]) == 2
    assert "is a file but not a model" in capsys.readouterr().err
    stringy = tmp_path / "p.jsonl"
    stringy.write_text('{"question_id": 1, "category": "x", "turns": "Hello there"}\n')
    assert main(["bench", "--model", model_dir, "--prompts", str(stringy), "--methods", "ar", "--out",
                 str(tmp_path / "o")]) == 2
    assert "turns must be a list of strings" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    for argv in (["check", "--import", "no_such_plugin_mod"],
                 ["generate", "w5", "--model", model_dir, "--no-chat", "--import", "no_such_plugin_mod"]):
        assert main(argv) == 2
        assert "--import no_such_plugin_mod: no module of that name" in capsys.readouterr().err
    (tmp_path / "needs_more.py").write_text("import no_such_dependency_mod\n")
    assert main(["check", "--import", "needs_more"]) == 2
    assert "imports 'no_such_dependency_mod', which is not installed" in capsys.readouterr().err


def test_a_prompt_file_runs_whole_unless_told(model_dir, tmp_path, capsys):
    """A --prompts file of one's own ran 2 prompts per category unless --num-prompts said otherwise (a file of
    13 prompts in one category ran 2, silently); Spec-Bench keeps its 2 per category."""
    from leap.bench.records import read_records

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(f'{{"question_id": {i}, "category": "seed", "turns": ["w5 w6 w{i}"]}}\n'
                               for i in range(3)))
    for extra, expected in (([], {0, 1, 2}), (["--num-prompts", "1"], {0})):
        out = tmp_path / f"bench{len(extra)}"
        assert main(["bench", "--model", model_dir, "--no-chat", "--prompts", str(prompts), "--methods",
                     "prompt-lookup", "--max-new-tokens", "4", "--warmup", "0", "--quiet", "--out", str(out),
                     *extra]) == 0
        assert {r["question_id"] for r in read_records(out) if r.get("kind") == "answer"} == expected
    capsys.readouterr()


def test_bench_batch_size_writes_one_record_a_batch(model_dir, tmp_path, capsys):
    """Issue 37: `leap bench --batch-size 2` decodes first turns two at a time; batch_cap reaches the method."""
    from leap.bench.records import read_records

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(f'{{"question_id": {i}, "category": "c", "turns": ["w{i + 5} w6 w{i + 5} w6"]}}\n'
                               for i in range(3)))
    out = tmp_path / "bench"
    assert main(["bench", "--model", model_dir, "--no-chat", "--prompts", str(prompts), "--methods", "suffix",
                 "--method-arg", "suffix:batch_cap=auto", "--batch-size", "2", "--max-new-tokens", "6",
                 "--out", str(out), "--quiet", "--warmup", "0"]) == 0
    recs = [r for r in read_records(out) if r["kind"] == "answer"]
    assert [(r["method"], r["question_id"], r["batch_size"]) for r in recs] == [
        ("ar", "b0", 2), ("suffix", "b0", 2), ("ar", "b1", 1), ("suffix", "b1", 1)]
    assert all(r["status"] == "ok" and r["lossless"] for r in recs if r["method"] == "suffix")
    assert set(recs[1]["batch_caps"]) <= {0, 2, 4, 8}  # the bandit's caps, not the fixed default 16
    assert main(["bench", "--model", model_dir, "--no-chat", "--prompts", str(prompts), "--batch-size", "0",
                 "--out", str(tmp_path / "zero"), "--quiet"]) == 2
    assert "batch_size" in capsys.readouterr().err


def test_compare_says_where_outputs_differ_and_how_close_plain_decodings_choice_was(model_dir, capsys, monkeypatch):
    """Greedy, `--compare` must not only say DIFFERENT: it names the first new token that differs and the plain
    model's top-2 logit margin there (the brief: report the margin where outputs diverge), and says whether that is a
    bug (float32) or a near-tie of a low-precision dtype. Here a planted acceptance bug (every draft kept) makes the
    float32 output differ; the reported position is the first differing token, recomputed from the two outputs."""
    from leap.core.decoding import session as session_module
    from leap.core.verify.divergence import first_divergence

    monkeypatch.setattr(session_module, "greedy_accept",
                        lambda draft, logits: (len(draft), int(logits[len(draft)].argmax())))
    args = ["generate", "w5 w6 w7", "--model", model_dir, "--no-chat", "--skip", "2,3", "--max-new-tokens", "12",
            "--compare", "--repeats", "1", "--device", "cpu"]
    assert main(args + ["--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["identical_to_plain"] is False
    from leap.core import SelfSpecDecoder, load_model  # the position, recomputed from the two outputs

    model = load_model(model_dir, device="cpu")
    ids = model.encode("w5 w6 w7", chat=False)
    plain = SelfSpecDecoder(model, None).generate(ids, max_new_tokens=12).token_ids
    first = next(i for i, (a, b) in enumerate(zip(plain, record["token_ids"])) if a != b)
    assert record["divergence"]["position"] == first and record["divergence"]["margin"] >= 0
    assert record["divergence"] == first_divergence(model, ids, plain, record["token_ids"])
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"DIFFERENT at new token {first}" in err and "a bug in leap" in err


def test_a_difference_in_a_low_precision_dtype_is_called_a_near_tie_and_in_float32_a_bug():
    from types import SimpleNamespace

    from leap.cli.generate import _difference

    at = {"position": 3, "margin": 0.0625}
    low = _difference(at, SimpleNamespace(dtype=torch.bfloat16))
    assert "at new token 3" in low and "0.0625" in low and "near-tie" in low and "bug" not in low
    assert "a bug in leap" in _difference(at, SimpleNamespace(dtype=torch.float32))
