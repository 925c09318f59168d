"""leap's own seed prompts (leap.heads.prompts): held-out text that is never Spec-Bench."""

from __future__ import annotations

import json

from leap.heads.prompts import LONG_TASKS, long_seed_prompts, seed_prompts, write_prompt_file


def _spec_bench_turns() -> list[str]:
    from leap.data import SPEC_BENCH

    with open(SPEC_BENCH) as f:
        return [turn for line in f for turn in json.loads(line)["turns"]]


def test_long_seed_prompts_are_long_fixed_and_extend_each_other():
    every = long_seed_prompts()
    assert len(every) >= 20 and long_seed_prompts(20) == every[:20] == long_seed_prompts(20)
    for prompt in every:
        task = next(t for t in LONG_TASKS if all(part in prompt for part in t.split("{doc}") if part))
        document = prompt.replace(task.split("{doc}")[0], "", 1).replace(task.split("{doc}")[1], "")
        assert len(document) >= 1800, prompt[:80]


def test_no_seed_prompt_holds_spec_bench_text():
    """The prompts the search's prior and the heads learn from never overlap the evaluation's (red if a Spec-Bench
    turn were among the documents)."""
    ours = "\n".join(long_seed_prompts() + seed_prompts(2000))
    for turn in _spec_bench_turns():
        for line in (x.strip() for x in turn.splitlines()):
            assert len(line) < 40 or line not in ours, line[:80]


def test_write_prompt_file_names_its_kind(tmp_path):
    path = tmp_path / "long.jsonl"
    write_prompt_file(str(path), 2, 3, long=True)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["question_id"] for r in rows] == ["seed-long-2", "seed-long-3", "seed-long-4"]
    assert {r["category"] for r in rows} == {"seed-long"} and rows[0]["turns"] == [long_seed_prompts(5)[2]]
