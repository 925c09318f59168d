"""``exit-head``: the model's layers below ``k`` draft, a trained exit head on layer ``k`` reads them.

Kangaroo / DVI self-drafting (:mod:`leap.heads.exit_head`): every draft token runs the step's layer
configuration *below* ``k`` - all of those layers when the step has none (then they are an exact prefix:
verification reuses their outputs and starts at layer ``k``) - and the exit head turns the residual stream
entering layer ``k`` into draft logits over its draft vocabulary. The decoding session does the drafting
(its layer-skip draft, stopped by the decoder's draft policy, greedy or sampled from the head's
distribution after the request's temperature and top-p, so the speculative sampling rule applies as to
any layer draft); this drafter only names the layer (:attr:`~leap.core.drafters.base.Drafter.exit_layer`)
and supplies the exit (:meth:`exit_logits`). It uses layers: a search pairs it with a layer
configuration, of which only the part below ``k`` matters. Lossless: the full model verifies every token.

Which head: ``head=PATH`` (from ``leap train-head --layer k``; its record names ``k``), ``head=untrained``
(the plain early exit at ``layer``: final norm and LM head on layer ``k`` - the ablation baseline the
registry-wide tests run), by default the head trained for the loaded model on ``layer`` under
``$LEAP_CACHE``, else one shipped in ``leap/data/heads/`` (:func:`leap.heads.store.default_exit_head_path`).
``layer`` defaults to a third of the model's layers.

Online learning (``online=True``, DVI-style): after every step it drafted, the session hands the drafter the
verified positions' inputs of layer ``k`` and the verifier's logits there (``Drafter.observe_exit_states``);
one AdamW step every ``online_every`` new positions over the last ``online_window``, at most
``online_max_updates`` per prompt, learning rate ``online_lr`` - on the step's measured clock. The head then
keeps plain (trainable) linears, and what it learns carries over to the following prompts.

Trees (``shape=``, greedy): ``"chain"`` (default); ``"eagle2"`` - EAGLE-2's dynamic tree
(:mod:`leap.heads.dynamic_tree`) drafted through the layers below ``k``: ``num_tokens`` deep (3), the ``width``
(2) most valuable nodes of each depth expanded in *one* pass of those layers with tree attention
(:mod:`leap.core.decoding.exit_tree`), the ``tree_nodes`` most valuable nodes kept; ``"opt"`` - the same, cut
where OPT-Tree's expected speed under the calibrated verification costs peaks. A tree costs one pass of the
layers below ``k`` per depth where a chain costs one per token; it is verified by the full model with tree
attention (the layers below ``k`` are not reused). Under sampling a tree-shaped exit head drafts its sampled
chain. Measured against chains:
``experiments/2026-11-26-drafters-notebook/NOTES.md`` (``experiments/2026-11-24-exit-trees/exit_trees.sh``).

Who calls what: the decoding session calls :meth:`use_model` when the drafter joins it and
:meth:`exit_logits` for every token the layers draft; with a tree shape, :meth:`propose_exit_tree` each
greedy step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from leap.core.drafters.base import Drafter, drafters
from leap.core.errors import SettingsError
from leap.core.modeling.draft_head import DraftHead
from leap.core.runtime.costs import DENSE_K
from leap.core.trees.draft_tree import DraftTree
from leap.heads.dynamic_tree import dynamic_tree, top_candidates
from leap.heads.exit_head import ExitHead, check_layer, load_exit_head
from leap.heads.online import OnlineDistiller
from leap.heads.train import training_step

__all__ = ["ExitHeadDrafter", "SHAPES"]

SHAPES = ("chain", "eagle2", "opt")


@drafters.register("exit-head")
class ExitHeadDrafter(Drafter):
    """The layers below ``layer`` and a trained exit head draft; the full model verifies."""

    name = "exit-head"
    uses_layers = True
    needs_model = True
    example_kwargs = {"head": "untrained"}  # runs on any model with no trained file

    def __init__(self, layer: int | None = None, head: str | ExitHead | None = None, rank: int = 256,
                 online: bool = False, online_lr: float = 1e-3, online_every: int = 16, online_window: int = 64,
                 online_max_updates: int = 64, shape: str = "chain", num_tokens: int = 3, width: int = 2,
                 tree_nodes: int = 0) -> None:
        if layer is not None and int(layer) < 1:
            raise SettingsError(f"exit-head: layer must be >= 1, got {layer}")
        if shape not in SHAPES:
            raise SettingsError(f"exit-head: unknown shape {shape!r}; choose one of {', '.join(SHAPES)}")
        if int(num_tokens) < 1 or int(width) < 1 or int(tree_nodes) < 0:
            raise SettingsError(f"exit-head: num_tokens >= 1, width >= 1 and tree_nodes >= 0, got {num_tokens}, "
                                f"{width} and {tree_nodes}")
        self.shape, self.num_tokens, self.width = shape, int(num_tokens), int(width)
        self.tree_nodes = 0 if shape == "chain" else int(tree_nodes) or DENSE_K
        self._nodes_from_costs = shape == "opt" and not int(tree_nodes)  # the calibration's max_tree_nodes
        self.needs_costs = shape == "opt"
        self.costs = None
        if shape != "chain":  # one read of the root's candidates and one of each deeper layer's
            self.host_reads_per_step = self.num_tokens
        self._eos: frozenset[int] = frozenset()
        self.online = bool(online)
        self.needs_exit_states = self.online
        self._online = dict(lr=float(online_lr), every=int(online_every), window=int(online_window),
                            max_updates=int(online_max_updates))
        if self.online and shape != "chain":  # exit states are handed over on the chain path only
            raise SettingsError(f"exit-head: online=true learns from the exit states of drafted chains; a tree "
                                f"(shape={shape}) hands none over, so it would never learn - use shape=chain with "
                                "online=true, or drop online")
        if self.online:
            OnlineDistiller.check(**self._online)  # bad settings fail now, not at the first prompt
        self._learner: _ExitLearner | None = None
        self.layer = None if layer is None else int(layer)
        self.rank = int(rank)
        self.head_source = head
        self.head: ExitHead | None = head if isinstance(head, ExitHead) else None
        self.exit_layer = self.head.layer if self.head is not None else self.layer
        self._model: Any = None
        self._lm: DraftHead | None = None

    @classmethod
    def default_layer(cls, model: Any) -> int:
        return cls.exit_layer_of(model.num_layers)

    @classmethod
    def unavailable(cls, model: Any, layer: int | None = None, head: str | ExitHead | None = None,
                    **kwargs: Any) -> str | None:
        """No ``head=`` given and no trained exit head on ``layer`` for ``model``."""
        if head is not None:
            return None
        from leap.heads.store import default_exit_head_path

        try:
            default_exit_head_path(model, cls.default_layer(model) if layer is None else int(layer))
        except SettingsError as e:
            return str(e)
        return None

    @classmethod
    def fingerprint(cls, model: Any, layer: int | None = None, head: str | ExitHead | None = None,
                    **kwargs: Any) -> str:
        """Its arguments' and the trained exit head's file (a head trained again is another drafter)."""
        from leap.heads.store import default_exit_head_path, file_stamp

        try:
            path = (default_exit_head_path(model, cls.default_layer(model) if layer is None else int(layer))
                    if head is None else head if isinstance(head, str) else None)
        except SettingsError:
            path = None
        return f"{super().fingerprint(model, layer=layer, head=head, **kwargs)}-{file_stamp(path)}"

    @classmethod
    def exit_layer_of(cls, num_layers: int, layer: int | None = None, head: str | ExitHead | None = None,
                      **kwargs: Any) -> int | None:
        """``layer=``, else the layer a ``head=`` object or file records, else a third of the layers (the default
        head's layer)."""
        if layer is not None:
            return int(layer)
        if isinstance(head, ExitHead):
            return head.layer
        if isinstance(head, str) and head != "untrained":
            from leap.heads.head import head_record

            try:
                return int(head_record(head)["layer"])
            except Exception:  # noqa: BLE001 - missing, not safetensors, no record: unreadable
                pass  # unreadable: the drafter's own load says why when it joins a session
        return max(1, num_layers // 3)

    def use_model(self, model: Any) -> None:
        if self._model is model:
            return
        with torch.inference_mode(False):  # sessions attach drafters under inference mode; a head made here
            head = self._make_head(model)  # stays trainable (online learning)
        check_layer(head.layer, model.num_layers)
        if self.layer is not None and head.layer != self.layer:
            raise SettingsError(f"exit-head: layer={self.layer} but the head was trained on layer {head.layer}; "
                                f"drop layer= or pass a head trained on layer {self.layer}")
        if self.online:
            self._learner = _ExitLearner(model, head, **self._online)
        elif head is not self.head_source and model.info.get("onednn_linears"):
            from leap.core.modeling.fast_linear import accelerate_linears

            accelerate_linears(head)  # it only drafts: pack its linears like the model's
        self.head, self.exit_layer = head, head.layer
        self._model, self._eos = model, frozenset(model.eos_token_ids)
        self._lm = DraftHead(model.lm_head, head.vocab_list)

    def _make_head(self, model: Any) -> ExitHead:
        layer = self.layer if self.layer is not None else self.default_layer(model)
        if isinstance(self.head_source, ExitHead):
            head = self.head_source
        elif self.head_source == "untrained":
            head = ExitHead.from_model(model, layer=layer, rank=self.rank)
        else:
            from leap.heads.store import default_exit_head_path

            path = self.head_source if isinstance(self.head_source, str) else default_exit_head_path(model, layer)
            head = load_exit_head(model, path)
        return head

    def use_costs(self, costs) -> None:
        self.costs = costs
        if self._nodes_from_costs:
            self.tree_nodes = costs.max_tree_nodes

    def begin(self, prompt: Sequence[int]) -> None:
        if self._learner is not None:
            self._learner.begin()

    def observe_exit_states(self, states: torch.Tensor, logits: torch.Tensor) -> None:
        if self._learner is not None:
            self._learner.observe(states, logits)

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        return []  # the session's layer draft drafts (exit_layer), reading exit_logits

    def continue_with_layers(self, proposed: int) -> bool:
        return True

    def propose_exit_tree(self, layers, max_depth: int) -> DraftTree:
        """EAGLE-2's dynamic tree through the layers below ``k``: one pass of them per depth."""
        depth = min(max_depth, self.num_tokens)
        entry: dict[int, int] = {}  # candidate -> its draft entry in the layers' cache

        def expand(layer: list[int], cands) -> list:
            parents = [0 if cands[i].parent < 0 else entry[cands[i].parent] for i in layer]
            logits, entries = layers.expand([cands[i].token for i in layer], parents)
            entry.update(zip(layer, entries))
            return top_candidates(logits, self.width)

        # OPT-Tree's cut is taken after the drafting is spent: that cost is sunk, the same for every size the cut
        # may keep (counting it as overhead would make "keep nothing" win whenever it exceeds the gain)
        return dynamic_tree(top_candidates(layers.root(), self.width)[0], expand, depth=depth, width=self.width,
                            max_nodes=self.tree_nodes, costs=self.costs if self.shape == "opt" else None,
                            stop_tokens=self._eos, context=layers.base + 1)

    def exit_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        if self._lm is None:
            raise SettingsError("exit-head: no model bound; the decoding session calls use_model(model) first")
        return self._lm(self.head(hidden))[0].float()


class _ExitLearner:
    """DVI-style online learning of an exit head: the verified positions' layer-``k`` inputs and the verifier's
    logits there, kept for the last ``window`` positions; one fused-AdamW step on the cross-entropy to the
    verifier's distribution over the draft vocabulary every ``every`` new positions, at most ``max_updates``
    per prompt. Called from the step's feedback, so its cost is on the measured clock; it reads nothing back
    to the host. Only the head's parameters change: never the model, never a committed token."""

    def __init__(self, model: Any, head: ExitHead, *, lr: float, every: int, window: int, max_updates: int) -> None:
        self.head, self.every, self.window, self.max_updates = head, every, window, max_updates
        with torch.inference_mode(False):
            head.requires_grad_(True)
            self.weight = model.lm_head.weight.detach()[head.vocab_ids].clone().float()
            self.opt = torch.optim.AdamW(list(head.parameters()), lr=lr, weight_decay=0.0, fused=True)
        self.begin()

    def begin(self) -> None:
        self.states: list[torch.Tensor] = []
        self.logits: list[torch.Tensor] = []
        self.kept = self.new = self.updates = 0

    def observe(self, states: torch.Tensor, logits: torch.Tensor) -> None:
        m = states.shape[0]
        self.states.append(states)
        self.logits.append(logits[:, self.head.vocab_ids])
        self.kept, self.new = self.kept + m, self.new + m
        while self.kept - self.states[0].shape[0] >= self.window:  # keep the last window positions
            self.kept -= self.states.pop(0).shape[0]
            self.logits.pop(0)
        if self.new < self.every or (self.max_updates and self.updates >= self.max_updates):
            return
        with torch.inference_mode(False), torch.enable_grad():
            x = torch.cat(self.states).clone()  # the head's dtype; the loss in float32
            target = torch.softmax(torch.cat(self.logits).clone().float(), dim=-1)
            loss = -(target * torch.log_softmax(self.head(x).float() @ self.weight.T, dim=-1)).sum(-1).mean()
            training_step(self.opt, loss, self.head.parameters())
        self.updates, self.new = self.updates + 1, 0
