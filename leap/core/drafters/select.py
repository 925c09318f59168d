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
exploratory verification. The step's cost is the machine's calibrated cost model
(:mod:`leap.core.decoding.calibrate`): ``c(nodes + 1)``, a forward over the draft plus the pending token
relative to one token, plus the candidate's own measured overhead per step; the decoder hands the
calibration over through :meth:`use_costs`. Giving ``overhead`` and ``per_token`` replaces it by the
line ``1 + overhead + per_token * nodes`` (for experiments with a hypothetical machine).

Candidates: ``candidates="suffix;prompt-lookup;token-recycling"`` (names, or ``name:key=value&key=value``),
or a list of drafters. Every candidate hears ``begin``/``observe``/``finish``, so stateful ones
(Token Recycling's matrix, the suffix tries) stay current whichever is chosen.

Who calls what: the decoder calls :meth:`propose_tree` and :meth:`feedback`; ``leap bench --methods
select`` and the drafter dimension of the search (``--drafters "select;..."``) use it by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leap.core.trees.draft_tree import DraftTree
from leap.core.drafters.base import Drafter, drafters, make_drafter
from leap.core.drafters.match_buckets import MatchBuckets, bucket_of
from leap.core.errors import SettingsError
from leap.core.options import parse_spec

__all__ = ["Select", "accepted_along"]



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
    name, kwargs = parse_spec(spec, separator="&", what="select candidate")
    if name == "select" or drafters.get(name).uses_layers:
        raise SettingsError(f"select chooses among model-free drafters; {name!r} is not one")
    return make_drafter(name, **kwargs)


@drafters.register("select")
class Select(Drafter):
    """Drafts with the model-free candidate whose counterfactual acceptance predicts the best step."""

    name = "select"
    needs_costs = True

    def __init__(self, candidates: str | Sequence[str | Drafter] = "suffix;prompt-lookup;token-recycling",
                 overhead: float | None = None, per_token: float | None = None, min_gain: float = 1.0,
                 decay: float = 0.05,
                 max_bucket: int = 6, prior: float = 0.5) -> None:
        specs = [c for c in candidates.split(";") if c.strip()] if isinstance(candidates, str) else list(candidates)
        if not specs:
            raise SettingsError("select needs at least one candidate drafter")
        if (overhead is None) != (per_token is None):
            raise SettingsError("select: give both overhead and per_token (a fixed cost line), or neither "
                                "(the machine's calibrated costs)")
        if (overhead or 0) < 0 or (per_token or 0) < 0 or min_gain <= 0 or not 0 < decay <= 1 or max_bucket < 1 or prior < 0:
            raise SettingsError("select needs overhead, per_token, prior >= 0, min_gain > 0, 0 < decay <= 1 "
                                "and max_bucket >= 1")
        self.candidates = [_candidate(c) for c in specs]
        self.needs_logits = any(c.needs_logits for c in self.candidates)
        self.tree_nodes = max(c.tree_nodes for c in self.candidates)
        self.host_reads_per_step = sum(c.host_reads_per_step for c in self.candidates)  # every candidate proposes
        self.host_reads_per_node = sum(c.host_reads_per_node for c in self.candidates)
        self.overhead = None if overhead is None else float(overhead)
        self.per_token = None if per_token is None else float(per_token)
        self.min_gain = float(min_gain)
        self._costs = None  # the machine's Calibration, from use_costs
        self.decay, self.max_bucket, self.prior = float(decay), int(max_bucket), float(prior)
        self.stats = MatchBuckets(self.prior, self.decay)  # (candidate, bucket) -> mean accepted length
        self.mean, self.count = self.stats.mean, self.stats.count  # views, for reports and tests
        self.chosen: list[int] = [0] * len(self.candidates)  # drafts made with each candidate
        self.withheld = 0  # steps with a proposal but no expected gain: plain decoding
        self._open: list[tuple[int, int, int, DraftTree]] = []  # (start, candidate, bucket, tree) to score
        self._chosen: Drafter | None = None

    # ------------------------------------------------------------------ counterfactual scoring
    @classmethod
    def fingerprint(cls, model: Any, candidates: str | Sequence[str | Drafter] = "suffix;prompt-lookup;token-recycling",
                    **kwargs: Any) -> str:
        """Its own arguments' and each named candidate's."""
        own = super().fingerprint(model, candidates=candidates, **kwargs)
        specs = [c for c in candidates.split(";") if c.strip()] if isinstance(candidates, str) else list(candidates)
        parts = []
        for spec in specs:
            if isinstance(spec, str):
                name, args = parse_spec(spec, separator="&", what="select candidate")
                parts.append(drafters.get(name).fingerprint(model, **args))
        return "-".join([own, *parts])

    def _score(self, tokens: Sequence[int], final: bool = False) -> None:
        """Score every open proposal whose outcome the committed ``tokens`` now determine."""
        still_open = []
        for start, cand, bucket, tree in self._open:
            after = tokens[start:]
            accepted = accepted_along(tree, after)
            if accepted < len(after) or accepted >= tree.depth or final:  # a mismatch, or fully covered
                if len(after) or not final:
                    self.stats.learn((cand, bucket), accepted)
            else:
                still_open.append((start, cand, bucket, tree))
        self._open = still_open


    def expected_gain(self, candidate: int, bucket: int, nodes: int, context: int | None = None) -> float:
        """Predicted speedup of a step drafting ``nodes`` tokens with ``candidate`` in ``bucket``."""
        accepted = self.stats.expected((candidate, bucket))
        return (1.0 + accepted) / self.step_cost(candidate, nodes, context)

    def step_cost(self, candidate: int, nodes: int, context: int | None = None) -> float:
        """A step drafting ``nodes`` tokens with ``candidate`` after ``context`` tokens, in plain steps."""
        if self.overhead is not None:
            return 1.0 + self.overhead + self.per_token * nodes
        if self._costs is None:
            raise RuntimeError("select: no costs yet; the decoder calls use_costs() when the drafter joins a "
                               "session (or give overhead=... and per_token=...)")
        return self._costs.step_cost(nodes, drafter=self.candidates[candidate].name, context=context)

    def use_costs(self, costs) -> None:
        self._costs = costs

    # ------------------------------------------------------------------ drafting
    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        self._score(tokens)
        start = len(tokens)
        best: tuple[float, int, DraftTree] | None = None
        for i, cand in enumerate(self.candidates):
            tree = cand.propose_tree(tokens, max_depth)
            if not len(tree):
                continue
            bucket = bucket_of(cand, len(tree), self.max_bucket)
            self._open.append((start, i, bucket, tree))
            gain = self.expected_gain(i, bucket, len(tree), len(tokens))
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
