"""The Python examples in docs/agents.md run (on a tiny model in place of "smollm2"), so they cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leap.search import search_agents
from tests.tiny import save_tiny_model

DOC = Path(__file__).resolve().parents[1] / "docs" / "agents.md"


def test_agents_md_python_examples_run(tmp_path, monkeypatch):
    folder = save_tiny_model(tmp_path / "tiny", eos_token_id=None)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 3
    namespace: dict = {}
    try:
        for code in blocks:
            code = code.replace('"smollm2"', repr(str(folder))).replace("chat=True", "chat=False")
            code = code.replace('"Name three colours."', '[5, 6, 7, 8, 9]')
            exec(compile(code, str(DOC), "exec"), namespace)
    finally:
        search_agents.remove("greedy-skip")  # leave the registry as we found it
    # the Gymnasium loop: its return is the cost-model reward of the real steps the episode took
    from leap.search.reward import CostModelSpeedup

    env = namespace["env"].unwrapped
    steps = env.session.steps
    assert 1 <= len(steps) <= 8
    reward = CostModelSpeedup(env.decoder.costs)
    assert namespace["total"] == pytest.approx(sum(reward(s, env.model.num_layers) for s in steps))


def test_agents_md_shell_examples_name_real_flags():
    from leap.cli import build_parser

    text = DOC.read_text()
    for line in re.findall(r"^leap generate .*$", text, flags=re.M):
        for flag in re.findall(r"(--[a-z-]+)", line):
            assert flag in build_parser()._subparsers._group_actions[0].choices["generate"]._option_string_actions, flag
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate"])
