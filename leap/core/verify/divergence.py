"""Where a speculative output first leaves plain decoding's, and how close the plain model's choice was there.

Greedy speculation is token-identical to plain decoding in float32 (the tests hold it). In bfloat16 or float16 - the
default on a GPU - the verification forward over several tokens sums in another order than a one-token step, so at a
near-tie of the top two logits the two can pick different tokens: a difference there is rounding, not a bug, and the
brief's rule is to report it with the margin rather than hide it. :func:`first_divergence` gives the position and the
plain model's top-2 logit margin at it (one forward of the prompt and the shared prefix through every layer).

Who calls what: ``leap generate --compare`` (:mod:`leap.cli.generate`) where the outputs differ, ``leap smoke``
(:mod:`leap.bench.smoke`) for each path that differs, and ``leap bench`` (:mod:`leap.bench.harness`) for each greedy
request that differs from plain decoding's in a dtype other than float32 (``divergence_margin`` in its record).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["first_divergence"]


def first_divergence(model: Any, prompt: Sequence[int], reference: Sequence[int],
                     other: Sequence[int], stack: Any = None) -> dict[str, Any] | None:
    """Where ``other`` first leaves ``reference`` (new tokens after ``prompt``) and the reference model's top-2 logit
    margin there, with both tokens; None where one is a prefix of the other (no token differs). ``stack``: a
    :class:`~leap.core.modeling.layers.LayerStack` of ``model`` to reuse (a caller checking many outputs)."""
    from leap.core.modeling.layers import LayerStack

    n = next((i for i, (a, b) in enumerate(zip(reference, other)) if a != b), None)
    if n is None:
        return None
    stack = LayerStack(model) if stack is None else stack
    with torch.inference_mode():
        ids = [int(t) for t in prompt] + [int(t) for t in reference[:n]]
        hidden = stack.run_layers(stack.embed(ids), stack.full_plan, stack.new_cache(len(ids)), 0)
        top = torch.topk(stack.logits(hidden[:, -1:])[0].float().reshape(-1), 2).values.tolist()
    return {"position": n, "margin": top[0] - top[1], "reference_token": int(reference[n]), "token": int(other[n])}
