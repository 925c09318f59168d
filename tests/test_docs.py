"""The Python examples in docs/agents.md run (on a tiny model in place of "smollm2"), so they cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leap.core.drafters import drafters
from leap.core.verify.tree_rules import tree_rules
from leap.redundancy.base import redundancy_metrics
from leap.search import search_agents
from tests.tiny import save_tiny_model

DOC = Path(__file__).resolve().parents[1] / "docs" / "agents.md"


def _contracts_on_the_docs_plugins(tiny_llama):
    """The contract tests every registered plug-in passes, run on the docs' own examples (issue 36: the docs'
    agent failed the state_dict round trip, its metric made 30 host reads where one is allowed)."""
    from tests.core.runtime import test_host_reads as reads
    from tests.search import test_agent_contract as agent

    for check in (agent.test_proposals_are_inside_the_space_and_obey_zones, agent.test_same_seed_same_proposals,
                  agent.test_tell_never_changes_history, agent.test_state_dict_round_trips,
                  agent.test_different_seeds_give_different_searches_unless_declared_deterministic,
                  agent.test_reseed_restarts_the_sequence):
        check(name="greedy-skip")
    reads.test_every_metric_reads_its_result_once(tiny_llama, "update-norm")
    reads.test_every_drafter_keeps_its_declared_host_reads(tiny_llama, "repeat-last", {}, 0.0, "match")


def test_agents_md_python_examples_run(tmp_path, monkeypatch, tiny_llama):
    folder = save_tiny_model(tmp_path / "tiny", eos_token_id=None)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 9
    namespace: dict = {}
    try:
        for code in blocks:
            code = code.replace('"smollm2"', repr(str(folder))).replace("chat=True", "chat=False")
            code = code.replace('"Name three colours."', '[5, 6, 7, 8, 9]')
            # forked workers cannot use CUDA (the page says so): on a GPU machine the tiny copies stay on the CPU
            code = code.replace('vectorization_mode="async",', 'vectorization_mode="async", device="cpu",')
            exec(compile(code, str(DOC), "exec"), namespace)
        _check_metric_and_drafter(folder)
        _contracts_on_the_docs_plugins(tiny_llama)
    finally:  # leave the registries as we found them
        search_agents.remove("greedy-skip")
        search_agents.remove("random-skip")
        redundancy_metrics.remove("update-norm")
        drafters.remove("repeat-last")
        if "first-path" in tree_rules:
            tree_rules.remove("first-path")
    # the Gymnasium loop: its return is the cost-model reward of the real steps the episode took
    from leap.search.reward import CostModelSpeedup

    # the agent-driven loop: every step the agent proposed is a step the environment took, in its space
    agent_env, history = namespace["agent_env"].unwrapped, namespace["history"]
    assert 1 <= len(history) == len(agent_env.session.steps) <= 8
    assert all(t.config is None or agent_env.space.from_config(t.config) is not None for t in history)
    env = namespace["env"].unwrapped
    steps = env.session.steps
    assert 1 <= len(steps) <= 8
    reward = CostModelSpeedup(env.decoder.costs)
    assert namespace["total"] == pytest.approx(sum(reward(s, env.model.num_layers) for s in steps))


def _check_metric_and_drafter(folder):
    """The metric example drives zones; the drafter example is lossless and really drafts; the tree rule
    example runs."""
    from leap.core import SelfSpecDecoder, load_model
    from leap.core.modeling.trace import capture_trace
    from leap.redundancy.build import SpaceSettings, space_from_traces

    model = load_model(str(folder))
    trace = capture_trace(model, list(range(4, 30)), positions=8)
    space = space_from_traces(trace, SpaceSettings(zone_metric="update-norm"))
    assert len(space.zones) == model.num_layers and "update-norm" in space.metrics
    prompt = [5, 6, 7, 5, 6, 7, 5, 6]
    plain = SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=16)
    drafted = SelfSpecDecoder(model, None, drafter="repeat-last").generate(prompt, max_new_tokens=16)
    assert drafted.token_ids == plain.token_ids and drafted.draft_tokens_proposed > 0
    # the tree rule example verifies stand's trees: plain decoding under greedy, 16 tokens under sampling
    rule = dict(drafter="stand", drafter_kwargs={"shape": "best-first"}, tree_verify="first-path")
    assert SelfSpecDecoder(model, None, **rule).generate(prompt, max_new_tokens=16).token_ids == plain.token_ids
    sampled = SelfSpecDecoder(model, None, **rule).generate(prompt, max_new_tokens=16, temperature=1.0, seed=0)
    assert sampled.new_tokens == 16


def test_agents_md_shell_examples_name_real_flags():
    from leap.cli import build_parser

    text = DOC.read_text()
    commands = build_parser()._subparsers._group_actions[0].choices
    lines = re.findall(r"^leap (generate|bench|redundancy) (.*)$", text, flags=re.M)
    assert {c for c, _ in lines} == {"generate", "bench", "redundancy"}
    for command, line in lines:
        for flag in re.findall(r"(--[a-z-]+)", line):
            assert flag in commands[command]._option_string_actions, (command, flag)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate"])


def test_agents_md_tensors_are_made_on_the_device_they_meet():
    """Every tensor the examples create names its device (or copies another's with ``*_like``): a CPU tensor
    written into a CUDA row, or ``torch.rand(generator=cuda_generator)`` without ``device=``, crashes on a GPU."""
    import ast

    makers = {"tensor", "zeros", "ones", "rand", "randn", "randint", "arange", "full", "empty", "as_tensor"}
    missing = []
    for code in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S):
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in makers \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch" \
                    and not any(k.arg == "device" for k in node.keywords):
                missing.append(ast.unparse(node))
    assert not missing, f"tensors made without device= in docs/agents.md: {missing}"


def test_agents_md_walk_from_an_empty_file_to_leap_report(tmp_path, monkeypatch, capsys):
    """Issue 36's "done when": the docs walk a researcher from an empty file (section 1's classes in my_agents.py)
    through `leap check`, `leap bench` beside the built-ins and `leap report` - the very lines of the docs, run
    here on a tiny model (model, prompts and length added; the output folder moved into tmp_path)."""
    import shlex
    import sys

    from leap.cli import main

    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (tmp_path / "my_agents.py").write_text(blocks[0] + "\n\n" + blocks[1])  # section 1's two agents
    walk = re.search(r"<!--walk:[^>]*-->\n```bash\n(.*?)```", text, flags=re.S).group(1)
    lines = [line for line in walk.splitlines() if line.startswith("leap ")]
    assert [line.split()[1] for line in lines] == ["check", "bench", "report"]
    folder = save_tiny_model(tmp_path / "tiny", eos_token_id=None)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"question_id": 1, "category": "writing", "turns": ["w5 w6 w7 w5 w6 w7"]}\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    out = str(tmp_path / "agents")
    try:
        for line in lines:
            args = [out if a == "results/agents" else a for a in shlex.split(line)[1:]]
            if args[0] == "bench":
                args += ["--model", str(folder), "--no-chat", "--prompts", str(prompts), "--max-new-tokens", "8",
                         "--warmup", "0", "--quiet", "--budget", "4"]
            assert main(args) == 0, line
        report = capsys.readouterr().out
        assert "| greedy-skip |" in report and "| leap |" in report and "| ucb |" in report
    finally:
        search_agents.remove("greedy-skip")
        search_agents.remove("random-skip")
        sys.modules.pop("my_agents", None)
