"""Token Recycling (Luo et al., 2024, "Turning Trash into Treasure: Accelerating Inference of Large
Language Models with Token Recycling").

Verification computes the target's distribution after every verified token, and all but the argmax
are thrown away. Token Recycling keeps them: an adjacency matrix ``M`` of shape ``[vocab, top_k]``
holds, for each token ``t``, the ``top_k`` most likely next tokens the last time the verifier saw
``t`` (row overwritten by every new observation, as in the paper). Drafting follows the matrix from
the last committed token: ``t -> M[t, 0] -> M[M[t, 0], 0] ...`` until a token has no row yet or
``num_tokens`` are proposed. The matrix persists across prompts (the paper's "recycling").

With ``tree_nodes > 1`` it drafts a tree, as the paper does, verified with tree attention: the
paper's static template is replaced by a best-first expansion over ``M`` in which the successor of
rank ``r`` has weight ``rank_decay ** r`` (a rank prior standing in for the template's shape); with
``tree_nodes <= 1`` it follows the top-1 path as one chain. ``shape="opt"`` cuts the tree by OPT-Tree's
expected acceptance under the machine's calibrated costs (:mod:`leap.core.trees.opt_tree`), rank-based
probabilities as scores.

Memory is bounded by construction: one ``int32`` matrix of ``vocab x top_k`` entries (SmolLM2:
49,152 x 8 = 1.5 MiB), allocated on the first observation. Updates are deterministic for a given
history (``torch.topk`` on the same logits, ties broken by index).

Who calls what: :class:`leap.core.decoding.decoder.DecodingSession` calls :meth:`observe` after every
verification (``needs_logits = True``) and :meth:`propose` when this drafter drafts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from leap.core.runtime.costs import DENSE_K
from leap.core.trees.draft_tree import DraftTree
from leap.core.trees.opt_tree import check_shape, shaped_tree
from leap.core.drafters.base import Drafter, drafters
from leap.core.errors import SettingsError

__all__ = ["TokenRecycling"]


@drafters.register("token-recycling")
class TokenRecycling(Drafter):
    """Token Recycling: follow each token's top-1 successor recycled from earlier verification logits."""

    name = "token-recycling"
    host_reads_per_step = 1  # observe: the verifier's top-k rows, once per step
    needs_logits = True

    def __init__(self, top_k: int = 8, num_tokens: int = 6, tree_nodes: int = 0, rank_decay: float = 0.4,
                 shape: str = "best-first") -> None:
        if top_k < 1 or num_tokens < 1 or tree_nodes < 0 or not 0 < rank_decay < 1:
            raise SettingsError("token-recycling needs top_k >= 1, num_tokens >= 1, tree_nodes >= 0 and "
                                "0 < rank_decay < 1")
        self.top_k, self.num_tokens = int(top_k), int(num_tokens)
        self.shape = check_shape(shape, "token-recycling")
        self.tree_nodes = int(tree_nodes) or (DENSE_K if shape == "opt" else 0)
        self._nodes_from_costs = shape == "opt" and not int(tree_nodes)  # the calibration's max_tree_nodes
        self.rank_decay = float(rank_decay)
        self.needs_costs, self.costs = shape == "opt", None
        self.matrix: np.ndarray | None = None  # [vocab, top_k] int32, -1 = never observed

    @property
    def nbytes(self) -> int:
        return 0 if self.matrix is None else int(self.matrix.nbytes)

    def observe(self, inputs: Sequence[int], logits: torch.Tensor) -> None:
        vocab = int(logits.shape[-1])
        if self.matrix is None or self.matrix.shape[0] != vocab:
            self.matrix = np.full((vocab, self.top_k), -1, dtype=np.int32)
        k = min(self.top_k, vocab)
        top = torch.topk(logits.float(), k, dim=-1, sorted=True).indices.cpu().numpy().astype(np.int32)
        for token, row in zip(inputs, top):
            self.matrix[int(token), :k] = row

    def _successors(self, token: int) -> list[tuple[int, float, int]]:
        if self.matrix is None or not 0 <= token < self.matrix.shape[0]:
            return []
        return [(int(t), self.rank_decay**rank, int(t)) for rank, t in enumerate(self.matrix[token]) if t >= 0]

    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        if self.tree_nodes <= 1 or not tokens:
            return super().propose_tree(tokens, max_depth)
        return shaped_tree(self._successors, int(tokens[-1]), shape=self.shape, max_nodes=self.tree_nodes,
                           max_depth=min(max_depth, self.num_tokens), costs=self.costs,
                           overhead=self.costs.drafter_overhead.get(self.name, 0.0) if self.costs else 0.0,
                           who="token-recycling", context=len(tokens))

    def use_costs(self, costs) -> None:
        self.costs = costs
        if self._nodes_from_costs:
            self.tree_nodes = costs.max_tree_nodes

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        if self.matrix is None or not tokens:
            return []
        out: list[int] = []
        token = int(tokens[-1])
        while len(out) < min(max_tokens, self.num_tokens):
            if not 0 <= token < self.matrix.shape[0]:
                break
            nxt = int(self.matrix[token, 0])
            if nxt < 0:
                break
            out.append(nxt)
            token = nxt
        return out
