"""Prompt lookup decoding (Saxena, 2023): copy what followed an earlier occurrence of the last n-gram.

For n from ``max_ngram`` down to ``min_ngram``, find the earliest earlier occurrence of the last n
tokens in the prompt and the generated text, and propose the (up to ``num_tokens``) tokens that
followed it; no match, no draft. transformers' ``prompt_lookup_num_tokens`` is the same rule.
With ``tree_nodes > 1`` the continuations of *every* match (longest n-grams first, earliest first)
are merged into a draft tree of at most ``tree_nodes`` nodes, verified with tree attention.

:class:`NgramIndex` is the same lookup kept as an index grown with the context, for a caller that guesses at every
drafted token: ``lowbit``'s multi-level draft (``pre="lookup"``, :mod:`leap.core.drafters.lowbit`).
"""

from __future__ import annotations

from collections.abc import Sequence

from leap.core.trees.draft_tree import DraftTree
from leap.core.drafters.base import Drafter, drafters
from leap.core.errors import SettingsError

__all__ = ["PromptLookup", "NgramIndex"]


@drafters.register("prompt-lookup")
class PromptLookup(Drafter):
    """Prompt lookup decoding: copy what followed the earliest earlier match of the last n-gram."""

    name = "prompt-lookup"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1, num_tokens: int = 10, tree_nodes: int = 0) -> None:
        if not 1 <= min_ngram <= max_ngram or num_tokens < 1 or tree_nodes < 0:
            raise SettingsError("prompt-lookup needs 1 <= min_ngram <= max_ngram, num_tokens >= 1 and tree_nodes >= 0")
        self.max_ngram, self.min_ngram, self.num_tokens = int(max_ngram), int(min_ngram), int(num_tokens)
        self.tree_nodes = int(tree_nodes)
        self.last_match = 0  # n of the n-gram behind the latest proposal

    def _continuations(self, tokens: list[int], limit: int):
        """Continuations of the last n-gram's earlier occurrences: longest n first, earliest first."""
        for n in range(min(self.max_ngram, len(tokens) - 1), self.min_ngram - 1, -1):
            tail = tokens[-n:]
            first = tail[0]
            for start in range(len(tokens) - n):
                if tokens[start] == first and tokens[start : start + n] == tail:
                    continuation = tokens[start + n : start + n + limit]
                    if continuation:
                        self.last_match = n  # read by the gated drafter
                        yield continuation

    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        if self.tree_nodes <= 1:
            return super().propose_tree(tokens, max_depth)
        tree = DraftTree()
        self.last_match = 0
        first = 0
        for continuation in self._continuations(list(tokens), min(max_depth, self.num_tokens)):
            first = first or self.last_match  # the longest n-gram's match is the one reported
            tree.add_path(continuation, max_nodes=self.tree_nodes)
            if len(tree) >= self.tree_nodes:
                break
        self.last_match = first
        return tree

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        self.last_match = 0
        return next(self._continuations(list(tokens), min(max_tokens, self.num_tokens)), [])


class NgramIndex:
    """Prompt lookup as an index: the latest earlier occurrence of a chain's last 3-gram (else 2-gram) in a context,
    and what followed it - the first level of ``lowbit``'s multi-level draft (``pre="lookup"``,
    :mod:`leap.core.drafters.lowbit`). It keeps every n-gram's latest end, grown with the context (rebuilt when a new
    request's context is not a continuation), so a guess is a dict lookup - prompt lookup's scan over the context at
    every drafted token would cost as much as the token."""

    SIZES = (3, 2)

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.ends: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in self.SIZES}

    def cover(self, context: Sequence[int]) -> None:
        """Index every n-gram of ``context`` that has a token after it."""
        have = len(self.tokens)
        if have > len(context) or list(context[:have]) != self.tokens:
            self.tokens, have = [], 0
            self.ends = {n: {} for n in self.SIZES}
        self.tokens.extend(int(t) for t in context[have:])
        for end in range(max(have - 1, 1), len(self.tokens)):  # n-grams ending at `end` (exclusive), followed
            for n, table in self.ends.items():
                if end >= n:
                    table[tuple(self.tokens[end - n:end])] = end

    def guess(self, context: Sequence[int], chain: Sequence[int], limit: int) -> list[int]:
        """What followed the latest earlier occurrence of ``(context + chain)``'s last n-gram (at most ``limit``)."""
        if limit <= 0:
            return []
        tail = (list(context[-3:]) + list(chain))[-3:]
        for n in self.SIZES:
            end = self.ends[n].get(tuple(tail[-n:])) if len(tail) >= n else None
            if end is not None:
                follow = list(context[end:end + limit])
                if len(follow) < limit and end + limit > len(context):
                    follow += list(chain[: end + limit - len(context)])
                return follow[:limit]
        return []
