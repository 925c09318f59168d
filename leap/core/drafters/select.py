"""Counterfactual drafter selection: every step, the model-free drafter whose drafts *would have* paid.

A model-free draft depends only on the token history, so how many of its tokens would have been
accepted at any earlier step is known for free once the text after that step is committed (greedy:
the committed text is the target's own choice; sampling: a deterministic draft token is accepted
with probability ``p(token)``, the probability that the committed sample equals it, so the same
count is an unbiased estimate). :class:`Select` exploits that: at every step it asks *every*
candidate drafter for its proposal, later scores each proposal against the committed text, and keeps
per (candidate, match bucket) an exponentially weighted mean of the accepted length (buckets as in
:mod:`.gated`: the candidate's ``last_match``, capped). It drafts with the candidate of the highest
expected speedup of the step,

    (1 + expected accepted) / (1 + overhead + per_token * draft nodes),

and does not draft at all when no candidate reaches ``min_gain`` (the step is plain decoding). So it
notices when drafting does not pay - per step, for every candidate, without spending a single
exploratory verification. ``overhead`` and ``per_token`` are the verification cost model: a forward
over ``k + 1`` tokens relative to one token, ``1 + overhead + per_token * k``; the defaults (0.25,
0.035) are this project's CPU's, measured by ``python benchmarks/drafter_ceiling.py`` (float32,
oneDNN linears: 1.25x at k = 1, 1.33x at k = 4, 1.50x at k = 8; ``core_bench.py --section forward``
measured 1.19-1.34x on a quieter run); set them for your hardware (on a GPU both are near 0).

Candidates: ``candidates="suffix;prompt-lookup;token-recycling"`` (names, or ``name:key=value&key=value``),
or a list of drafters. Every candidate hears ``begin``/``observe``/``finish``, so stateful ones
(Token Recycling's matrix, the suffix tries) stay current whichever is chosen.

Who calls what: the decoder calls :meth:`propose_tree` and :meth:`feedback`; ``leap bench --methods
select`` and the drafter dimension of the search (``--drafters "select;..."``) use it by name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from leap.core.draft_tree import DraftTree
from leap.core.drafters.base import Drafter, drafters, make_drafter
from leap.core.errors import SettingsError

__all__ = ["Select", "accepted_along"]

_NOT_MODEL_FREE = ("select", "hybrid", "layer-skip")


def accepted_along(tree: DraftTree, continuation: Sequence[int]) -> int:
    """How many tokens of ``tree`` a verifier would accept if the target's text is ``continuation``."""
    row, accepted = 0, 0
    for token in continuation:
        row = tree.children(row).get(int(token), 0)
        if not row:
            break
        accepted += 1
    return accepted


def _candidate(spec: str | Drafter) -> Drafter:
    if isinstance(spec, Drafter):
        return spec
    name, _, rest = spec.strip().partition(":")
    kwargs: dict[str, Any] = {}
    for item in filter(None, rest.split("&")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SettingsError(f"select: candidate parameters are key=value, got {item!r} in {spec!r}")
        try:
            kwargs[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key.strip()] = value.strip()
    if name in _NOT_MODEL_FREE:
        raise SettingsError(f"select chooses among model-free drafters; {name!r} is not one")
    return make_drafter(name, **kwargs)


@drafters.register("select")
class Select(Drafter):
    """Drafts with the model-free candidate whose counterfactual acceptance predicts the best step."""

    name = "select"

    def __init__(self, candidates: str | Sequence[str | Drafter] = "suffix;prompt-lookup;token-recycling",
                 overhead: float = 0.25, per_token: float = 0.035, min_gain: float = 1.0, decay: float = 0.05,
                 max_bucket: int = 6, prior: float = 0.5) -> None:
        specs = [c for c in candidates.split(";") if c.strip()] if isinstance(candidates, str) else list(candidates)
        if not specs:
            raise SettingsError("select needs at least one candidate drafter")
        if overhead < 0 or per_token < 0 or min_gain <= 0 or not 0 < decay <= 1 or max_bucket < 1 or prior < 0:
            raise SettingsError("select needs overhead, per_token, prior >= 0, min_gain > 0, 0 < decay <= 1 "
                                "and max_bucket >= 1")
        self.candidates = [_candidate(c) for c in specs]
        self.needs_logits = any(c.needs_logits for c in self.candidates)
        self.tree_nodes = max(c.tree_nodes for c in self.candidates)
        self.overhead, self.per_token, self.min_gain = float(overhead), float(per_token), float(min_gain)
        self.decay, self.max_bucket, self.prior = float(decay), int(max_bucket), float(prior)
        self.mean: dict[tuple[int, int], float] = {}  # (candidate, bucket) -> mean accepted length
        self.count: dict[tuple[int, int], int] = {}
        self.chosen: list[int] = [0] * len(self.candidates)  # drafts made with each candidate
        self.withheld = 0  # steps with a proposal but no expected gain: plain decoding
        self._open: list[tuple[int, int, int, DraftTree]] = []  # (start, candidate, bucket, tree) to score
        self._chosen: Drafter | None = None

    # ------------------------------------------------------------------ counterfactual scoring
    def _score(self, tokens: Sequence[int], final: bool = False) -> None:
        """Score every open proposal whose outcome the committed ``tokens`` now determine."""
        still_open = []
        for start, cand, bucket, tree in self._open:
            after = tokens[start:]
            accepted = accepted_along(tree, after)
            if accepted < len(after) or accepted >= tree.depth or final:  # a mismatch, or fully covered
                if len(after) or not final:
                    self._learn((cand, bucket), accepted)
            else:
                still_open.append((start, cand, bucket, tree))
        self._open = still_open

    def _learn(self, key: tuple[int, int], accepted: int) -> None:
        n = self.count.get(key, 0) + 1
        self.count[key] = n
        mean = self.mean.get(key, self.prior)
        self.mean[key] = mean + max(1.0 / n, self.decay) * (accepted - mean)

    def expected_gain(self, candidate: int, bucket: int, nodes: int) -> float:
        """Predicted speedup of a step drafting ``nodes`` tokens with ``candidate`` in ``bucket``."""
        accepted = self.mean.get((candidate, bucket), self.prior)
        return (1.0 + accepted) / (1.0 + self.overhead + self.per_token * nodes)

    # ------------------------------------------------------------------ drafting
    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        self._score(tokens)
        start = len(tokens)
        best: tuple[float, int, DraftTree] | None = None
        for i, cand in enumerate(self.candidates):
            tree = cand.propose_tree(tokens, max_depth)
            if not len(tree):
                continue
            match = getattr(cand, "last_match", None)
            bucket = min(self.max_bucket, int(match if match else len(tree)))
            self._open.append((start, i, bucket, tree))
            gain = self.expected_gain(i, bucket, len(tree))
            if best is None or gain > best[0]:
                best = (gain, i, tree)
        self._chosen = None
        if best is None:
            return DraftTree()
        if best[0] < self.min_gain:
            self.withheld += 1
            return DraftTree()
        self._chosen = self.candidates[best[1]]
        self.chosen[best[1]] += 1
        return best[2]

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        return self.propose_tree(tokens, max_tokens).first_chain()

    def feedback(self, drafted: int, accepted: int) -> None:
        if self._chosen is not None:
            self._chosen.feedback(drafted, accepted)
        self._chosen = None

    # ------------------------------------------------------------------ pass-through
    def begin(self, prompt: Sequence[int]) -> None:
        self._open = []
        for c in self.candidates:
            c.begin(prompt)

    def observe(self, inputs, logits) -> None:
        for c in self.candidates:
            if c.needs_logits:
                c.observe(inputs, logits)

    def finish(self, tokens: Sequence[int]) -> None:
        self._score(tokens, final=True)
        for c in self.candidates:
            c.finish(tokens)
