"""``eagle``: a trained feature head drafts from the verifier's own top-layer features.

EAGLE (Li et al., 2024): the head (:class:`~leap.heads.head.FeatureHead`) keeps a one-layer KV cache over
the committed context, each position fed with the verifier's feature there and the embedding of the
token after it. Every verification hands the drafter the features of the positions it verified correct
(:meth:`~leap.core.drafters.base.Drafter.observe_features`); a proposal first feeds the positions not yet
in its cache (one pass), then drafts token by token from predicted features, and finally crops its cache
back to the verified context, so no draft feature outlives its step.

Greedy: the argmax chain over the draft vocabulary, stopped early when the draft's top probability
falls below ``min_confidence`` (default 0.3, chosen on held-out seed prompts by
``experiments/2026-11-23-heads-tuning/heads_tuning.sh``: 1.23x there against 1.04x for unstopped chains; never tuned on Spec-Bench).
Sampling: each token drawn from ``q`` = the draft distribution after the
request's temperature and top-p, cut to its ``top_k`` most likely tokens and renormalised (the exact
distribution it was drawn from), so speculative sampling and Traversal Verification keep the target
distribution. Lossless either way: the full model verifies every token.

Trees (``shape=``): ``"chain"`` (default); ``"eagle2"`` - EAGLE-2's dynamic tree
(:mod:`leap.heads.dynamic_tree`): ``num_tokens`` layers deep, the ``width`` best nodes of each layer
expanded in one head pass, the ``tree_nodes`` most valuable nodes kept; ``"opt"`` - the same, cut where
OPT-Tree's expected speed under the calibrated verification costs peaks (``tree_nodes`` only caps it).
These two are greedy (their trees are ranked by value, which the draws of sampling cannot follow); under
sampling they draft the sampled chain. Sampled trees have fixed skeletons instead (:mod:`leap.core.trees.
stochastic_tree`), fixed before any draw: ``"siblings"`` - the chain of ``num_tokens`` plus ``width - 1``
alternatives at every depth, as leaves (one head pass per chain node, as the chain); ``"delayed"`` - a trunk
of ``trunk`` tokens, then ``branches`` chains of ``branch_len`` (delayed tree expansion). Each node with
children runs the head once, with tree attention over its ancestors' entries; its children are Gumbel-Top-K
draws without replacement from ``q`` (greedy: the most likely), each node carrying the exact distribution it
was drawn from, so Traversal Verification and the multi-draft rules keep the target distribution.

Online learning (``online=True``, DVI/OSD-style, :mod:`leap.heads.online`): the head keeps training on
the verified positions of the prompt being answered - one step every ``online_every`` verified positions
over the last ``online_window``, at most ``online_max_updates`` per prompt, learning rate ``online_lr`` -
inside the proposal, so on the measured clock. The head then keeps plain (trainable) linears instead of
oneDNN's packed ones, and what it learns carries over to the following prompts.

Which head: ``head=PATH`` (a safetensors file from ``leap train-head``), ``head=untrained`` (the head as
initialised: an ablation baseline, and what the registry-wide tests run); by default the head trained for
the loaded model under ``$LEAP_CACHE/heads/``, then the one shipped in ``leap/data/heads/`` when it
was made for this model (:func:`leap.heads.store.default_head_path`).

Who calls what: the decoding session calls :meth:`use_model` when the drafter joins it, hands it the
prompt's and every verification's features (``needs_features``), and calls ``propose`` /
``propose_sampled`` every step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from leap.core.drafters.base import Drafter, drafters
from leap.core.errors import SettingsError
from leap.core.modeling.draft_head import DraftHead
from leap.core.modeling.kv_cache import LeapKVCache
from leap.core.trees.draft_tree import DraftTree
from leap.core.trees.stochastic_tree import delayed_shape, fill_shape, gumbel_top_k, most_likely, sibling_shape
from leap.core.runtime.costs import DENSE_K
from leap.core.verify.sampling import SamplingSettings, target_probs
from leap.heads.dynamic_tree import Candidate, dynamic_tree, top_candidates
from leap.heads.head import FeatureHead, causal_mask, load_head
from leap.heads.online import OnlineDistiller

__all__ = ["Eagle", "SHAPES"]

SHAPES = ("chain", "eagle2", "opt", "siblings", "delayed")


@drafters.register("eagle")
class Eagle(Drafter):
    """A trained EAGLE feature head drafts chains from the verifier's own top-layer features."""

    name = "eagle"
    needs_model = True
    needs_features = True
    samples_drafts = True
    host_reads_per_node = 1  # each drafted token is read to feed the next draft step
    example_kwargs = {"head": "untrained"}  # runs on any model with no trained file

    def __init__(self, num_tokens: int = 6, head: str | FeatureHead | None = None, min_confidence: float = 0.3,
                 top_k: int = 64, shape: str = "chain", width: int = 4, tree_nodes: int = 0, online: bool = False,
                 online_lr: float = 1e-3, online_every: int = 16, online_window: int = 32,
                 online_max_updates: int = 64, trunk: int = 4, branches: int = 2, branch_len: int = 2) -> None:
        if num_tokens < 1:
            raise SettingsError(f"eagle: num_tokens must be >= 1, got {num_tokens}")
        if shape not in SHAPES:
            raise SettingsError(f"eagle: unknown shape {shape!r}; choose one of {', '.join(SHAPES)}")
        if width < 1 or tree_nodes < 0:
            raise SettingsError(f"eagle: width >= 1 and tree_nodes >= 0, got {width} and {tree_nodes}")
        if trunk < 0 or branches < 1 or branch_len < 1:
            raise SettingsError("eagle: trunk >= 0, branches >= 1 and branch_len >= 1")
        self.shape, self.width = shape, int(width)
        self.skeleton = (sibling_shape(int(num_tokens), self.width) if shape == "siblings"
                         else delayed_shape(int(trunk), int(branches), int(branch_len)) if shape == "delayed" else None)
        self.tree_nodes = 0 if shape == "chain" else len(self.skeleton) if self.skeleton else int(tree_nodes) or DENSE_K
        self._nodes_from_costs = shape == "opt" and not int(tree_nodes)  # the calibration's max_tree_nodes
        self.needs_costs = shape == "opt"
        self.costs = None
        if self.skeleton:  # per node with children: its candidates, and the uniforms of its Gumbel-Top-K draws
            self.host_reads_per_step = 2 * len(set(self.skeleton))
        elif shape != "chain":  # one read of each layer's candidates (and of the root's), whatever the tree keeps
            self.host_reads_per_step = num_tokens + 1
        if not 0.0 <= min_confidence < 1.0:
            raise SettingsError(f"eagle: min_confidence must be in [0, 1), got {min_confidence}")
        self.num_tokens = int(num_tokens)
        self.min_confidence = float(min_confidence)
        if shape == "chain" and self.min_confidence:  # the read of the unsure token that stops the chain
            self.host_reads_per_step = 1
        self.top_k = max(int(top_k), 1)
        self.online = bool(online)
        self._online_settings = dict(lr=float(online_lr), every=int(online_every), window=int(online_window),
                                     max_updates=int(online_max_updates))
        self.learner: OnlineDistiller | None = None
        if self.online:
            OnlineDistiller.check(**self._online_settings)  # bad settings fail now, not at the first prompt
        self.head_source = head
        self.head: FeatureHead | None = head if isinstance(head, FeatureHead) else None
        self.settings = SamplingSettings(0.0, 1.0)
        self._model: Any = None
        self._eos: frozenset[int] = frozenset()
        self._lm: DraftHead | None = None
        self._features: torch.Tensor | None = None  # verified features of positions 0.._known-1 (a growing buffer)
        self._known = 0  # positions with a verified feature
        self._cache = LeapKVCache(1)
        self._fed = 0  # head cache entries (verified positions fed with the token after them)

    # ------------------------------------------------------------------ hooks
    @classmethod
    def unavailable(cls, model: Any, head: str | FeatureHead | None = None, **kwargs: Any) -> str | None:
        """No ``head=`` given and no trained head for ``model`` (none under ``$LEAP_CACHE``, none shipped)."""
        if head is not None:
            return None  # the user's own head or path: its errors are theirs to see when it loads
        from leap.heads.store import default_head_path

        try:
            default_head_path(model)
        except SettingsError as e:
            return str(e)
        return None

    @classmethod
    def fingerprint(cls, model: Any, head: str | FeatureHead | None = None, **kwargs: Any) -> str:
        """Its arguments' and the trained head's file (a head trained again is another drafter)."""
        from leap.heads.store import default_head_path, file_stamp

        try:
            path = default_head_path(model) if head is None else head if isinstance(head, str) else None
        except SettingsError:
            path = None
        return f"{super().fingerprint(model, head=head, **kwargs)}-{file_stamp(path)}"

    def use_model(self, model: Any) -> None:
        if self._model is model:
            return
        with torch.inference_mode(False):  # sessions attach drafters under inference mode; a head made here
            self.head = self._make_head(model)  # stays trainable (online learning)
        if self.online:  # trains while it drafts: plain linears (packed ones pass no gradient)
            self.learner = OnlineDistiller(model, self.head, **self._online_settings)
        elif self.head is not self.head_source and model.info.get("onednn_linears"):
            from leap.core.modeling.fast_linear import accelerate_linears

            accelerate_linears(self.head)  # a head loaded here only drafts: pack its linears like the model's
        self._model, self._eos = model, model.eos_token_ids
        self._lm = DraftHead(model.lm_head, self.head.vocab_list)

    def _make_head(self, model: Any) -> FeatureHead:
        if isinstance(self.head_source, FeatureHead):
            return self.head_source
        if self.head_source == "untrained":  # an ablation baseline: the head as initialised, no training
            return FeatureHead.from_model(model)
        from leap.heads.store import default_head_path

        path = self.head_source if isinstance(self.head_source, str) else default_head_path(model)
        return load_head(model, path)

    def use_sampling(self, settings: SamplingSettings) -> None:
        self.settings = settings

    def use_costs(self, costs) -> None:
        self.costs = costs
        if self._nodes_from_costs:
            self.tree_nodes = costs.max_tree_nodes

    def begin(self, prompt: Sequence[int]) -> None:
        self._features, self._known, self._fed = None, 0, 0
        self._cache = LeapKVCache(1)
        if self.learner is not None:
            self.learner.begin()

    def observe_features(self, start: int, features: torch.Tensor) -> None:
        if start > self._known:  # a gap: the positions between are unknown; keep what it holds
            return
        if start < self._known:  # a rewind keeps what still lines up (entry start-1 reads x_start: redo it)
            self._known = start
            self._restart_cache(max(start - 1, 0))
        end = start + features.shape[0]
        if self._features is None or end > self._features.shape[0]:  # grow by doubling: no copy per step
            grown = features.new_empty((max(2 * end, 64), features.shape[1]))
            if self._features is not None:
                grown[:start] = self._features[:start]
            self._features = grown
        self._features[start:end] = features
        self._known = end

    # ------------------------------------------------------------------ drafting
    def _run(self, feats: torch.Tensor, tokens: Sequence[int], positions: Sequence[int], mask_of) -> torch.Tensor:
        """Feed ``feats`` ([q, H]) with the embeddings of ``tokens`` at ``positions`` into the head's cache
        under the additive mask ``mask_of(dtype)`` builds (None: no mask); -> the predicted features [q, H]."""
        model, device = self._model, feats.device
        ids = torch.as_tensor(list(tokens), dtype=torch.long, device=device).view(1, -1)
        embeds = model.embed_tokens(ids)
        position_ids = torch.as_tensor(list(positions), dtype=torch.long, device=device).view(1, -1)
        pos = model.rotary_emb(embeds, position_ids=position_ids)
        return self.head(feats.view(1, len(tokens), -1).to(embeds.dtype), embeds, pos, position_ids=position_ids,
                         cache=self._cache, attention_mask=mask_of(embeds.dtype))[0]

    def _step(self, feats: torch.Tensor, tokens: Sequence[int], start: int) -> torch.Tensor:
        """Feed ``feats`` ([q, H]) with the embeddings of ``tokens`` at positions ``start..``; -> last f_hat."""
        q = len(tokens)
        return self._run(feats, tokens, range(start, start + q),
                         lambda dtype: causal_mask(start, q, dtype, feats.device))[-1]

    def _first(self, tokens: Sequence[int]) -> torch.Tensor | None:
        """Feed the verified positions not yet in the cache; the predicted feature after ``tokens``."""
        if self._model is None:
            raise SettingsError("eagle: no model bound; the decoding session calls use_model(model) first")
        n = len(tokens)
        if self._known < n - 1 or n < 2:
            return None  # features missing (a drafter used outside a session): no draft
        feats = self._features
        if self.learner is not None and self.learner.update(tokens, feats, self._known):
            self._restart_cache(max(self._known - self.learner.window, 0))  # re-feed what the window trained on
        self._restart_cache(n - 2)
        return self._step(feats[self._fed:n - 1], tokens[self._fed + 1:n], self._fed)

    def _restart_cache(self, upto: int) -> None:
        """Crop the head cache to at most ``upto`` verified entries (draft entries never outlive a step)."""
        self._fed = min(self._fed, upto)
        extra = self._cache.layers[0].length - self._fed
        if extra > 0:
            self._cache.layers[0].crop(-extra)

    def _draft(self, tokens: Sequence[int], max_tokens: int, pick) -> list:
        with torch.inference_mode():
            feature = self._first(tokens)
            if feature is None:
                return []
            n = len(tokens)
            self._fed = n - 1  # every verified position is in the cache now
            out: list = []
            limit = min(max_tokens, self.num_tokens)
            while len(out) < limit:
                logits = self._lm(feature.view(1, 1, -1))[0, 0].float()
                chosen = pick(logits, out)
                if chosen is None:
                    break
                out.append(chosen)
                token = chosen[0] if isinstance(chosen, tuple) else chosen
                if token in self._eos:  # nothing follows an end of sequence
                    break
                if len(out) < limit:
                    feature = self._step(feature.view(1, -1), [token], n - 1 + len(out) - 1)
            self._restart_cache(n - 1)
            return out

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        def greedy(logits, out):
            if not self.min_confidence:
                return int(torch.argmax(logits).item())
            top, token = torch.softmax(logits, -1).max(dim=-1)
            p, token = torch.stack([top.double(), token.double()]).tolist()  # one read for both
            return None if out and p < self.min_confidence else int(token)

        return self._draft(tokens, max_tokens, greedy)

    def propose_sampled(self, tokens: Sequence[int], max_tokens: int,
                        generator: torch.Generator | None) -> list[tuple[int, dict[int, float]]]:
        def sampled(logits, out):
            probs = target_probs(logits.unsqueeze(0), self.settings)[0]
            top = torch.topk(probs, min(self.top_k, probs.numel()))
            q = top.values / top.values.sum()  # the exact distribution of the draw
            index = torch.multinomial(q.to(generator.device) if generator is not None else q, 1,
                                      generator=generator)
            packed = torch.cat([index.to(q.device).double(), top.indices.double(), q.double()]).tolist()  # one read
            k = len(q)
            ids, values = [int(t) for t in packed[1:k + 1]], packed[k + 1:]
            return ids[int(packed[0])], {t: v for t, v in zip(ids, values) if v > 0.0}

        return self._draft(tokens, max_tokens, sampled)

    # ------------------------------------------------------------------ trees (EAGLE-2)
    def _candidates(self, features: torch.Tensor) -> list[tuple[list[int], list[float]]]:
        """Each row's ``width`` most likely draft tokens and their probabilities (one host read)."""
        return top_candidates(self._lm(features.unsqueeze(0))[0], self.width)

    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        if self.shape == "chain":
            return super().propose_tree(tokens, max_depth)
        if self.skeleton is not None:
            return self._fill(tokens, max_depth, most_likely, sampled=False)
        depth = min(max_depth, self.num_tokens)
        with torch.inference_mode():
            root = self._first(tokens) if depth >= 1 else None
            if root is None:
                return DraftTree()
            n = len(tokens)
            self._fed = n - 1
            verified = self._cache.layers[0].length  # the head's entries of verified positions
            predicted: dict[int, torch.Tensor] = {}  # candidate -> the feature its entry predicts
            entry: dict[int, int] = {}  # candidate -> its head cache entry

            def expand(layer: list[int], cands: list[Candidate]):
                past, q = self._cache.layers[0].length, len(layer)
                visible = [[False] * (past - verified + q) for _ in range(q)]  # draft entries only: small
                for j, i in enumerate(layer):
                    entry[i] = past + j
                    a = i
                    while a >= 0:
                        visible[j][entry[a] - verified] = True
                        a = cands[a].parent
                feats = torch.stack([root if cands[i].parent < 0 else predicted[cands[i].parent] for i in layer])
                out = self._step_tree(feats, [cands[i].token for i in layer],
                                      [n - 2 + cands[i].depth for i in layer], verified, visible)
                for j, i in enumerate(layer):
                    predicted[i] = out[j]
                return self._candidates(out)

            overhead = self.costs.drafter_overhead.get(self.name, 0.0) if self.costs is not None else 0.0
            tree = dynamic_tree(self._candidates(root.view(1, -1))[0], expand, depth=depth, width=self.width,
                                max_nodes=self.tree_nodes, costs=self.costs if self.shape == "opt" else None,
                                overhead=overhead, stop_tokens=self._eos, context=n)
            self._restart_cache(n - 1)
            return tree

    # ------------------------------------------------------------------ trees of a fixed skeleton (sampled)
    def propose_sampled_tree(self, tokens: Sequence[int], max_depth: int, generator) -> DraftTree:
        if self.skeleton is None:
            return super().propose_sampled_tree(tokens, max_depth, generator)
        return self._fill(tokens, max_depth, gumbel_top_k(generator), sampled=True)

    def _fill(self, tokens: Sequence[int], max_depth: int, choose, sampled: bool) -> DraftTree:
        """The skeleton filled by :func:`~leap.core.trees.stochastic_tree.fill_shape`: a node's candidates are the
        head's ``q`` after its root path (``top_k``, renormalised; after temperature and top-p when sampling),
        from one head pass over the node with tree attention to its ancestors' entries."""
        with torch.inference_mode():
            root = self._first(tokens)
            if root is None:
                return DraftTree()
            n = len(tokens)
            self._fed = n - 1
            verified = self._cache.layers[0].length
            feature: dict[tuple[int, ...], torch.Tensor] = {(): root}  # path -> the feature its entry predicts
            entry: dict[tuple[int, ...], int] = {}  # path -> its head cache entry

            def lookup(path: tuple[int, ...]):
                if path:
                    entry[path] = past = self._cache.layers[0].length
                    visible = [[False] * (past - verified + 1)]
                    for d in range(1, len(path) + 1):
                        visible[0][entry[path[:d]] - verified] = True
                    feature[path] = self._step_tree(feature[path[:-1]].view(1, -1), [path[-1]], [n - 2 + len(path)],
                                                    verified, visible)[0]
                logits = self._lm(feature[path].view(1, 1, -1))[0, 0].float()
                probs = target_probs(logits.unsqueeze(0), self.settings)[0] if sampled else torch.softmax(logits, -1)
                top = torch.topk(probs, min(self.top_k, probs.numel()))
                ids, q = torch.stack([top.indices.double(), (top.values / top.values.sum()).double()]).tolist()
                return [int(t) for t in ids], q

            tree = fill_shape(self.skeleton, lookup, choose, max_depth)
            self._restart_cache(n - 1)
            return tree

    def _step_tree(self, feats: torch.Tensor, tokens: list[int], positions: list[int], verified: int,
                   visible: list[list[bool]]) -> torch.Tensor:
        """One head pass over a layer of tree nodes: each sees the verified entries and its own ancestors."""
        def mask(dtype):
            drafts = torch.zeros(len(tokens), len(visible[0]), dtype=dtype)  # draft entries only: small, on the host
            drafts.masked_fill_(~torch.tensor(visible, dtype=torch.bool), torch.finfo(dtype).min)
            return torch.cat([torch.zeros(len(tokens), verified, dtype=dtype, device=feats.device),
                              drafts.to(feats.device)], dim=1).view(1, 1, len(tokens), -1)

        return self._run(feats, tokens, positions, mask)
