"""Seed prompts for self-distillation: topics x task templates written for leap (Apache-2.0, this repository).

Never Spec-Bench or any evaluation prompt: these are leap's own short instructions, spread over the kinds of
request Spec-Bench measures (writing, roleplay, reasoning, math, coding, extraction, STEM, humanities,
translation, summarisation, QA, retrieval-style questions) so the model's own answers to them cover the
same registers. :func:`seed_prompts` draws ``n`` of them in a seed-fixed order; the model answers them
(:mod:`leap.heads.data`), as EAGLE-2/3 and HASS train on the target's own answers.

:func:`long_seed_prompts` are leap's long prompts (600 tokens and more: the search memory's "long" condition,
:class:`leap.search.memory.SearchMemory`): summarisation and retrieval-style tasks over documents written for leap - the
module docstrings of its own source, a technical prose that is this repository's (Apache-2.0) and never Spec-Bench's.
``benchmarks/search_prior.sh`` (``PRIOR=long``) learns the shipped prior's long-prompt set on them.
"""

from __future__ import annotations

import random

__all__ = ["TOPICS", "TEMPLATES", "MATH", "LONG_TASKS", "seed_prompts", "long_seed_prompts", "write_prompt_file"]

TOPICS = [
    "the water cycle", "photosynthesis", "black holes", "the French Revolution", "the Roman Empire",
    "machine learning", "climate change", "volcanoes", "the human heart", "vaccines", "electric cars",
    "the stock market", "inflation", "renewable energy", "the internet", "honeybees", "coral reefs",
    "the printing press", "chess", "jazz music", "the Olympic Games", "coffee", "sleep", "meditation",
    "time management", "public speaking", "a job interview", "learning a new language", "gardening",
    "baking bread", "a city park", "a rainy day", "a lost dog", "a lighthouse keeper", "a space station",
    "a small bakery", "a robot that learns to paint", "a detective in Paris", "a mountain village",
    "friendship", "kindness", "curiosity", "failure", "the moon landing", "the Great Wall of China",
    "ancient Egypt", "the Renaissance", "democracy", "human rights", "the immune system", "DNA",
    "plate tectonics", "earthquakes", "the solar system", "gravity", "electricity", "magnets",
    "prime numbers", "fractions", "probability", "percentages", "geometry", "algebra", "statistics",
    "sorting algorithms", "recursion", "databases", "web browsers", "passwords", "encryption",
    "open source software", "smartphones", "social media", "online shopping", "remote work",
    "healthy eating", "running a marathon", "recycling", "plastic pollution", "rainforests", "deserts",
    "the ocean", "penguins", "elephants", "dinosaurs", "evolution", "antibiotics", "the brain",
    "memory", "habits", "budgeting", "saving money", "starting a business", "teamwork", "leadership",
    "a school trip", "a birthday party", "a train journey", "winter holidays", "a museum visit",
]

TEMPLATES = [
    "Explain {t} to a high school student.",
    "Write a short story about {t}.",
    "Write a short poem about {t}.",
    "Give me five tips about {t}.",
    "What are the pros and cons of {t}?",
    "Summarize the most important facts about {t} in a paragraph.",
    "Write a persuasive paragraph about why people should care about {t}.",
    "Pretend you are a tour guide and describe {t} to visitors.",
    "Write a dialogue between a teacher and a student about {t}.",
    "List three common misconceptions about {t} and correct them.",
    "Write an email to a friend telling them about {t}.",
    "Answer briefly: why is {t} important?",
    "Translate into French and explain your choices: 'I am learning about {t}.'",
    "Write a step-by-step plan for a beginner interested in {t}.",
    "Compare {t} with something similar and explain the differences.",
    "Write a Python function related to {t}, with a short explanation.",
]

MATH = [
    "A shop sells pens at {a} dollars each. How much do {b} pens cost? Explain step by step.",
    "What is {a} times {b}, plus {c}? Show your work.",
    "A train travels {a} kilometres in {b} hours. What is its average speed?",
    "If a rectangle is {a} cm long and {b} cm wide, what are its area and perimeter?",
    "Tom has {a} apples and gives {c} to each of his {b} friends. How many are left, if any?",
    "Solve for x: {a}x + {c} = {b}.",
    "Write a Python function that returns the sum of the first {a} prime numbers.",
    "What is {c} percent of {a}{b}? Explain.",
]


def seed_prompts(n: int | None = None, seed: int = 0) -> list[str]:
    """``n`` distinct prompts (templates x topics, plus numbered math and code tasks), in a seed-fixed order:
    the first ``n`` of the whole shuffled pool (``n=None``: all of it), so a longer list extends a shorter one."""
    rng = random.Random(seed)
    pool = [tpl.format(t=topic) for tpl in TEMPLATES for topic in TOPICS]
    for i, tpl in enumerate(MATH):
        for j in range(60):
            pool.append(tpl.format(a=3 + (7 * j + i) % 47, b=2 + (5 * j + 3 * i) % 19, c=1 + (3 * j + i) % 11))
    pool = sorted(set(pool))
    rng.shuffle(pool)
    if n is not None and n > len(pool):
        raise ValueError(f"at most {len(pool)} seed prompts, asked for {n}")
    return pool if n is None else pool[:n]

#: the tasks a long seed prompt sets over its document ({doc}): summarisation and retrieval-style questions
LONG_TASKS = [
    "Summarize the following text in one paragraph.\n\n{doc}",
    "Read the documentation below, then explain in plain words what it describes and why.\n\n{doc}",
    "{doc}\n\nList the three most important points of the text above.",
    "Here are notes from a software project:\n\n{doc}\n\nWrite a short summary of them for a newcomer.",
    "Using only the text below, answer: what problem does it solve, and how?\n\n{doc}",
]


def _documents(min_chars: int) -> list[str]:
    """leap's own module docstrings of at least a third of ``min_chars``, in path order."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = []
    for path in sorted(root.rglob("*.py")):
        try:
            doc = ast.get_docstring(ast.parse(path.read_text()))
        except (OSError, SyntaxError, ValueError):
            continue
        if doc and len(doc) >= min_chars // 3:
            found.append(doc.strip())
    return found


def long_seed_prompts(n: int | None = None, seed: int = 0, min_chars: int = 1800) -> list[str]:
    """``n`` long prompts (``n=None``: as many as leap's docstrings make), in a seed-fixed order: each a
    :data:`LONG_TASKS` task over one document of at least ``min_chars`` characters (one docstring, or consecutive ones
    of the shuffled list joined), every docstring used once. They follow leap's source: the commit that ran a
    benchmark names them."""
    rng = random.Random(seed)
    docs = _documents(min_chars)
    rng.shuffle(docs)
    prompts, parts = [], []
    for doc in docs:
        parts.append(doc)
        if sum(map(len, parts)) >= min_chars:
            prompts.append(LONG_TASKS[len(prompts) % len(LONG_TASKS)].format(doc="\n\n".join(parts)))
            parts = []
    if n is not None and n > len(prompts):
        raise ValueError(f"at most {len(prompts)} long seed prompts, asked for {n}")
    return prompts if n is None else prompts[:n]


def write_prompt_file(path: str, start: int, n: int, long: bool = False) -> None:
    """Seed prompts ``start .. start + n - 1`` as a ``leap bench --prompts`` JSONL file (category ``seed``; with
    ``long``, :func:`long_seed_prompts`, category ``seed-long``): held-out text for tuning and measuring heads and
    the search's prior, when ``start`` is past the prompts a head trained on."""
    import json

    texts = (long_seed_prompts if long else seed_prompts)(start + n)[start:]
    kind = "seed-long" if long else "seed"
    with open(path, "w") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"question_id": f"{kind}-{start + i}", "category": kind, "turns": [text]}) + "\n")


if __name__ == "__main__":  # python -m leap.heads.prompts PATH START N [long] (the benchmark scripts' held-out prompts)
    import sys

    write_prompt_file(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), long=sys.argv[4:] == ["long"])
