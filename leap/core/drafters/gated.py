"""Gated drafting: draft only where drafting has paid, so a drafter never costs more than it gives.

A model-free draft is nearly free to make but not to verify: a verification of ``k + 1`` tokens costs
``c(k + 1)`` plain one-token steps (1.2-1.3 on this project's CPU; near 1 on a memory-bound GPU), so a
draft whose expected accepted length is below ``c(k + 1) - 1`` (plus the drafter's own overhead) slows
decoding down (the per-category losses of plain model-free drafters on translation and RAG prompts in
``docs/results.md``). The idea is AdaEDL's and TapOut's - decide per step whether drafting pays - with
a model-free signal instead of the draft's entropy: how long the drafter's match was.

:class:`Gated` wraps a drafter and keeps, per *match bucket* (the wrapped drafter's ``last_match``,
the n-gram or suffix match length behind its proposal, capped at ``max_bucket``; the proposal's
length for drafters without one), an exponentially weighted mean of the tokens accepted per draft.
It drafts in a bucket while that mean reaches the threshold - by default the break-even accepted
length of the proposal at hand, ``c(k + 1) - 1 + overhead`` from the machine's calibration
(:mod:`leap.core.decoding.calibrate`, handed over through :meth:`use_costs`), or a fixed ``min_accept``
(a new bucket starts at ``prior``, so it is tried), and retries a gated bucket every ``retry``-th time so that its estimate follows the text.
Statistics persist across prompts (the runner keeps drafter instances). Deterministic for a given
history. Everything else (observe, begin, finish, trees) passes through to the wrapped drafter.

Who calls what: the decoder calls :meth:`propose_tree` and :meth:`feedback` like any drafter's;
``gated:inner=suffix,tree_nodes=4`` in ``leap generate --drafters`` and ``leap bench``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from leap.core.trees.draft_tree import DraftTree
from leap.core.drafters.base import Drafter, drafters, make_drafter
from leap.core.drafters.match_buckets import MatchBuckets, bucket_of
from leap.core.errors import SettingsError

__all__ = ["Gated"]


@drafters.register("gated")
class Gated(Drafter):
    """A model-free drafter that only drafts in match buckets where its drafts have been accepted."""

    name = "gated"

    def __init__(self, inner: str | Drafter = "suffix", min_accept: float | None = None, retry: int = 8,
                 max_bucket: int = 6,
                 prior: float = 1.0, decay: float = 0.1, **inner_kwargs: Any) -> None:
        if inner == "gated" or (isinstance(inner, str) and drafters.get(inner).uses_layers):
            raise SettingsError("gated wraps a model-free drafter (suffix, prompt-lookup, token-recycling)")
        if (min_accept is not None and min_accept < 0) or retry < 1 or max_bucket < 1 or not 0 < decay <= 1:
            raise SettingsError("gated needs min_accept >= 0, retry >= 1, max_bucket >= 1 and 0 < decay <= 1")
        self.inner = make_drafter(inner, **inner_kwargs)
        self.needs_logits = self.inner.needs_logits
        self.tree_nodes = self.inner.tree_nodes
        self.host_reads_per_step, self.host_reads_per_node = self.inner.host_reads_per_step, self.inner.host_reads_per_node
        self.min_accept = None if min_accept is None else float(min_accept)
        self.needs_costs = self.min_accept is None or self.inner.needs_costs
        self._costs = None
        self.retry, self.max_bucket = int(retry), int(max_bucket)
        self.prior, self.decay = float(prior), float(decay)
        self.stats = MatchBuckets(self.prior, self.decay)  # bucket -> accepted tokens per verified draft
        self.mean, self.drafts = self.stats.mean, self.stats.count  # views, for reports and tests
        self.skipped: dict[int, int] = {}  # bucket -> proposals withheld since the last draft
        self._bucket: int | None = None  # bucket of the draft now being verified

    @classmethod
    def fingerprint(cls, model: Any, inner: str | Drafter = "suffix", **kwargs: Any) -> str:
        """Its own arguments' and its inner drafter's (a default of ``suffix`` changes what ``gated`` is)."""
        own = super().fingerprint(model, inner=inner, **kwargs)
        if not isinstance(inner, str):
            return own
        mine = set(inspect.signature(cls.__init__).parameters)
        part = {k: v for k, v in kwargs.items() if k not in mine}
        return f"{own}-{drafters.get(inner).fingerprint(model, **part)}"

    def bucket(self, proposed: int) -> int:
        return bucket_of(self.inner, proposed, self.max_bucket)

    @property
    def last_match(self) -> int | None:
        return self.inner.last_match

    def use_costs(self, costs) -> None:
        self._costs = costs
        if self.inner.needs_costs:
            self.inner.use_costs(costs)

    def threshold(self, nodes: int, context: int | None = None) -> float:
        """The accepted length a draft of ``nodes`` tokens must reach to pay: ``min_accept``, or the
        calibrated break-even ``c(nodes + 1) - 1 + overhead`` at ``context`` tokens."""
        if self.min_accept is not None:
            return self.min_accept
        if self._costs is None:
            raise RuntimeError("gated: no costs yet; the decoder calls use_costs() when the drafter joins a "
                               "session (or give min_accept=...)")
        return self._costs.step_cost(nodes, drafter=self.inner.name, context=context) - 1.0

    def pays(self, bucket: int, nodes: int = 1, context: int | None = None) -> bool:
        """Whether to draft ``nodes`` tokens in ``bucket`` now (counts a withheld proposal when not)."""
        if self.stats.expected(bucket) >= self.threshold(nodes, context):
            return True
        self.skipped[bucket] = self.skipped.get(bucket, 0) + 1
        if self.skipped[bucket] >= self.retry:
            self.skipped[bucket] = 0
            return True
        return False

    # ------------------------------------------------------------------ drafting
    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        tree = self.inner.propose_tree(tokens, max_depth)
        self._bucket = None
        if not len(tree):
            return tree
        bucket = self.bucket(len(tree))
        if not self.pays(bucket, len(tree), len(tokens)):
            return DraftTree()
        self._bucket = bucket
        return tree

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        return self.propose_tree(tokens, max_tokens).first_chain()

    def feedback(self, drafted: int, accepted: int) -> None:
        self.inner.feedback(drafted, accepted)
        bucket, self._bucket = self._bucket, None
        if bucket is None or drafted == 0:
            return
        self.stats.learn(bucket, accepted)

    # ------------------------------------------------------------------ pass-through
    def begin(self, prompt: Sequence[int]) -> None:
        self.inner.begin(prompt)

    def observe(self, inputs, logits) -> None:
        self.inner.observe(inputs, logits)

    def finish(self, tokens: Sequence[int]) -> None:
        self.inner.finish(tokens)
