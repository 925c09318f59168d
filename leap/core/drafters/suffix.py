"""SuffixDecoding (Oliaro et al., 2024, "SuffixDecoding: A Model-Free Approach to Speeding Up Large
Language Model Inference").

Two suffix structures, as in the paper: a *request* trie over the current prompt and output (built
incrementally, one token at a time) and a *global* trie over the outputs of earlier requests of this
drafter (bounded memory, oldest outputs evicted first). Both are depth-bounded suffix tries
(:class:`SuffixTrie`): every substring of length <= ``max_depth`` is a path from the root, and each
node counts its occurrences.

Drafting: find the longest suffix of the context (at most ``max_match`` tokens) that occurred
earlier with a continuation (its node has children), in either trie (the longer match wins, the
request trie on ties); from that node follow the most frequent child while the product of the
empirical probabilities ``count(child) / sum(count(children))`` stays >= ``min_prob``; the length is
capped by the match statistics, ``ceil(alpha * match_length)`` (the paper's ``MAX_SPEC = alpha * p``),
and by ``num_tokens``. With ``tree_nodes > 1`` it speculates a tree instead, as the paper does: from the
matched node, the most probable continuations best-first (:func:`~leap.core.trees.draft_tree.best_first_tree`
on the same empirical probabilities), at most ``tree_nodes`` nodes within the same depth cap; with ``shape="opt"`` that tree is cut to the size
the machine's verification costs say pays best (OPT-Tree, :mod:`leap.core.trees.opt_tree`).

Memory: the global trie holds at most ``max_nodes`` nodes; adding an output that would exceed it
evicts the oldest outputs and rebuilds (tested under long generations). Deterministic: counts depend
only on the token history; ties between children are broken by the smaller token id.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

from leap.core.runtime.costs import DENSE_K
from leap.core.trees.draft_tree import DraftTree
from leap.core.trees.opt_tree import check_shape, shaped_tree
from leap.core.drafters.base import Drafter, drafters
from leap.core.errors import SettingsError

__all__ = ["SuffixTrie", "SuffixDrafter"]


class SuffixTrie:
    """Occurrence counts of every substring of length <= ``max_depth`` of the sequences added."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = int(max_depth)
        self.clear()

    def clear(self) -> None:
        self.children: list[dict[int, int]] = [{}]
        self.count: list[int] = [0]
        self.depth: list[int] = [0]
        self._active: list[int] = []  # nodes of the suffixes (length < max_depth) of the stream so far

    def __len__(self) -> int:
        """Number of nodes (the root included)."""
        return len(self.count)

    def push(self, token: int) -> None:
        """Append one token to the current stream: every suffix ending at it is counted once. A batch pushes every
        row's accepted tokens each step and a request its whole prompt at its start, up to ``max_depth`` nodes a
        token: the loop keeps the lists in locals (a method call a node cost as much as the rest of the push)."""
        token = int(token)
        children, count, depth, limit = self.children, self.count, self.depth, self.max_depth
        new = []
        for node in (0, *self._active):
            kids = children[node]
            child = kids.get(token)
            if child is None:
                child = kids[token] = len(count)
                children.append({})
                count.append(0)
                depth.append(depth[node] + 1)
            count[child] += 1
            if depth[child] < limit:
                new.append(child)
        self._active = new

    def add(self, tokens: Sequence[int]) -> None:
        """Count a whole sequence as a new stream (its substrings do not join the previous stream's)."""
        self._active = []
        for t in tokens:
            self.push(t)
        self._active = []

    def match(self, context: Sequence[int], max_length: int | None = None) -> tuple[int, int]:
        """(node, length) of the longest suffix of ``context`` (at most ``max_length`` tokens) with a
        continuation; (0, 0) if none. A match of length m leaves ``max_depth - m`` tokens to continue."""
        n = len(context)
        longest = self.max_depth - 1 if max_length is None else min(self.max_depth - 1, int(max_length))
        for length in range(min(longest, n), 0, -1):
            node = 0
            for t in context[n - length :]:
                node = self.children[node].get(int(t), -1)
                if node < 0:
                    break
            if node > 0 and self.children[node]:
                return node, length
        return 0, 0

    def successors(self, node: int) -> list[tuple[int, float, int]]:
        """(token, empirical probability, child node) for every continuation of ``node``."""
        kids = self.children[node]
        total = sum(self.count[c] for c in kids.values())
        return [(token, self.count[child] / total, child) for token, child in sorted(kids.items())]

    def continuation(self, node: int, limit: int, min_prob: float) -> list[int]:
        """Follow the most frequent child from ``node`` while the path probability stays >= ``min_prob``."""
        out: list[int] = []
        prob = 1.0
        while len(out) < limit and self.children[node]:
            kids = self.children[node]
            total = sum(self.count[c] for c in kids.values())
            token, child = max(kids.items(), key=lambda kv: (self.count[kv[1]], -kv[0]))
            prob *= self.count[child] / total
            if prob < min_prob:
                break
            out.append(token)
            node = child
        return out


@drafters.register("suffix")
class SuffixDrafter(Drafter):
    """SuffixDecoding: the most frequent continuation of the longest matching suffix (prompt + earlier outputs)."""

    name = "suffix"

    def __init__(self, max_depth: int = 24, max_match: int = 8, num_tokens: int = 12, alpha: float = 2.0,
                 min_prob: float = 0.1, max_nodes: int = 200_000, tree_nodes: int = 0,
                 shape: str = "best-first") -> None:
        if not 1 <= max_match < max_depth or num_tokens < 1 or alpha <= 0 or not 0 <= min_prob <= 1 \
                or max_nodes < max_depth or tree_nodes < 0:
            raise SettingsError("suffix needs 1 <= max_match < max_depth, num_tokens >= 1, alpha > 0, "
                                "0 <= min_prob <= 1, max_nodes >= max_depth and tree_nodes >= 0")
        self.shape = check_shape(shape, "suffix")
        self.tree_nodes = int(tree_nodes) or (DENSE_K if shape == "opt" else 0)
        self._nodes_from_costs = shape == "opt" and not int(tree_nodes)  # the calibration's max_tree_nodes
        self.needs_costs, self.costs = shape == "opt", None
        self.max_match = int(max_match)
        self.num_tokens, self.alpha, self.min_prob, self.max_nodes = int(num_tokens), float(alpha), float(min_prob), \
            int(max_nodes)
        self.request = SuffixTrie(max_depth)
        self.global_ = SuffixTrie(max_depth)
        self.outputs: deque[list[int]] = deque()  # earlier outputs held by the global trie, oldest first
        self._tokens: list[int] = []
        self._prompt_len = 0
        self.last_match = 0  # length of the suffix match behind the latest proposal

    # ------------------------------------------------------------------ state
    def begin(self, prompt: Sequence[int]) -> None:
        self._retire()
        self._tokens = [int(t) for t in prompt]
        self._prompt_len = len(self._tokens)
        self.request.clear()
        for t in self._tokens:
            self.request.push(t)

    def _retire(self) -> None:
        """Move the finished request's output into the global trie, evicting the oldest outputs if needed."""
        output = self._tokens[self._prompt_len :]
        if not output:
            return
        self.outputs.append(output)
        self.global_.add(output)
        while self.outputs and len(self.global_) > self.max_nodes:
            self.outputs.popleft()
            self.global_.clear()
            for out in self.outputs:
                self.global_.add(out)

    def _sync(self, tokens: Sequence[int]) -> None:
        n = len(self._tokens)
        if not n or len(tokens) < n or list(tokens[:n]) != self._tokens:
            self.begin(tokens)  # not a continuation of what we saw: a new request
            return
        for t in tokens[n:]:
            self._tokens.append(int(t))
            self.request.push(int(t))

    def finish(self, tokens: Sequence[int]) -> None:
        self._sync(tokens)

    # ------------------------------------------------------------------ drafting
    def _match(self, tokens: Sequence[int], max_tokens: int) -> tuple[SuffixTrie, int, int]:
        """(trie, node, depth limit) of the longest match; limit 0 = no match."""
        self._sync(tokens)
        best = max(((trie, *trie.match(self._tokens, self.max_match)) for trie in (self.request, self.global_)),
                   key=lambda x: x[2])  # max() keeps the first (request) on ties
        trie, node, length = best
        self.last_match = length  # read by the gated drafter
        return trie, node, (min(max_tokens, self.num_tokens, math.ceil(self.alpha * length)) if length else 0)

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        trie, node, limit = self._match(tokens, max_tokens)
        return trie.continuation(node, limit, self.min_prob) if limit else []

    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        if self.tree_nodes <= 1:
            return super().propose_tree(tokens, max_depth)
        trie, node, limit = self._match(tokens, max_depth)
        if not limit:
            return DraftTree()
        return shaped_tree(trie.successors, node, shape=self.shape, max_nodes=self.tree_nodes, max_depth=limit,
                           costs=self.costs, overhead=self._overhead(), min_prob=self.min_prob, who="suffix",
                           context=len(tokens))

    def use_costs(self, costs) -> None:
        self.costs = costs
        if self._nodes_from_costs:
            self.tree_nodes = costs.max_tree_nodes

    def _overhead(self) -> float:
        return self.costs.drafter_overhead.get(self.name, 0.0) if self.costs is not None else 0.0
