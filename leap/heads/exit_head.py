"""A draft head on layer ``k < L``: the draft runs only the layers below ``k``, then a small trained exit.

Kangaroo (Liu et al., 2024, "Kangaroo: Lossless Self-Speculative Decoding via Double Early Exiting") and
DVI (Draft, Verify, and Improve, 2025) draft with the model's own shallow sub-network - layers ``0..k-1``
- and a small trained piece on its output, shared LM head; the full model verifies. Since the shallow
layers are exact, verification reuses their outputs for the drafted tokens (leap's exact prefix,
:mod:`leap.core.decoding.step_draft`) and starts at layer ``k``. Here the trained piece is DVI's choice, a
low-rank adapter, position-wise (no attention, no cache of its own):

    f_hat_t = norm(h_t + up(silu(down(in_norm(h_t)))))

``h_t`` is the residual stream entering layer ``k`` at position ``t`` (what layers ``0..k-1`` make of the
context), ``in_norm`` and ``norm`` copies of the model's final norm, ``down``: ``H -> rank``, ``up``:
``rank -> H`` initialised to zero - so the *untrained* head is the plain early exit (the final norm and LM
head read layer ``k`` directly: the layer-skip draft with every layer from ``k`` on skipped), the ablation
baseline. ``f_hat_t`` is read by the draft LM head over a reduced vocabulary (``vocab_ids``) as the
verifier's final-normed top-layer feature ``f_t`` would be. Kangaroo's adapter (one attention block) is
not built: a position-wise adapter needs no cache and runs inside the layer draft as its last step.

Training (:func:`train_exit_head`, ``leap train-head --layer k``): the same self-distillation data as the
EAGLE head (:mod:`leap.heads.data`: the model's own answers to leap's seed prompts), plus each position's
layer-``k`` state (:func:`leap.heads.data.layer_states`); the loss is the cross-entropy of the head's draft
distribution against the verifier's ``softmax(W f_t)`` over the draft vocabulary
(:func:`leap.heads.train.distribution_loss`, DVI's KL stage), at every answer position, in random minibatches
of positions. AdamW with warm-up and cosine decay, a checkpoint per epoch (resumable), held-out top-1
agreement after each epoch. Deterministic for a seed on one machine.

Who calls what: :class:`leap.heads.exit_drafter.ExitHeadDrafter` drafts with a head (the decoding session
calls its :meth:`ExitHead.forward` through ``Drafter.exit_logits``); ``leap train-head --layer k`` trains
one; :func:`leap.heads.head.save_head` / :func:`load_exit_head` store it.
"""

from __future__ import annotations

import copy
import math
import random
from pathlib import Path
from typing import Any

import torch
from torch import nn

from leap.core.errors import SettingsError
from leap.heads.data import DistillData, _bar

__all__ = ["ExitHead", "load_exit_head", "train_exit_head", "exit_positions"]


class ExitHead(nn.Module):
    """``h_t`` (the residual stream entering layer ``layer``) ``-> f_hat_t`` (module docstring)."""

    kind = "exit"

    def __init__(self, down: nn.Linear, up: nn.Linear, in_norm: nn.Module, norm: nn.Module,
                 vocab_ids: torch.Tensor, layer: int) -> None:
        super().__init__()
        self.down, self.up, self.in_norm, self.norm = down, up, in_norm, norm
        self.register_buffer("vocab_ids", vocab_ids.to(torch.long))
        self.layer = int(layer)
        self.init_layer = self.layer  # save_head's record field
        self.hidden_size = down.in_features
        self.rank = down.out_features
        self.vocab_size = 0
        self.vocab_list: list[int] = []

    @classmethod
    def from_model(cls, model: Any, *, layer: int, rank: int = 256, vocab_ids: torch.Tensor | None = None) -> ExitHead:
        """An untrained head (the plain early exit at ``layer``) for ``model``; ``1 <= layer < L``."""
        check_layer(layer, model.num_layers)
        if rank < 1:
            raise SettingsError(f"exit head: rank must be >= 1, got {rank}")
        hidden = model.config.hidden_size
        down = nn.Linear(hidden, rank, bias=False, device=model.device, dtype=model.dtype)
        up = nn.Linear(rank, hidden, bias=False, device=model.device, dtype=model.dtype)
        with torch.no_grad():
            init = torch.randn(rank, hidden, generator=torch.Generator().manual_seed(0)) * hidden ** -0.5
            down.weight.copy_(init)  # the same start on every device and for every global seed
            up.weight.zero_()
        ids = torch.arange(model.vocab_size) if vocab_ids is None else torch.as_tensor(vocab_ids).cpu()
        head = cls(down, up, copy.deepcopy(model.norm), copy.deepcopy(model.norm), ids.to(model.device), layer)
        head.vocab_size = model.vocab_size
        # the host list the DraftHead takes: read once here, at load time (never in a step)
        head.vocab_list = list(range(model.vocab_size)) if vocab_ids is None else ids.tolist()
        return head

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden``: ``[..., H]`` states entering layer ``layer`` -> predicted top-layer features ``[..., H]``."""
        return self.norm(hidden + self.up(nn.functional.silu(self.down(self.in_norm(hidden)))))


def check_layer(layer: int, num_layers: int) -> None:
    if not 1 <= int(layer) < num_layers:
        raise SettingsError(f"exit head: layer must be in 1..{num_layers - 1} (the draft runs the layers below it), "
                            f"got {layer}; for the top layer use the EAGLE head (--drafter eagle)")


def load_exit_head(model: Any, path: str | Path) -> ExitHead:
    """The exit head stored at ``path`` (by :func:`leap.heads.head.save_head`), built for ``model``."""
    from leap.heads.head import head_record, read_state

    path = Path(path)
    if not path.is_file():
        raise SettingsError(f"no exit head at {path}; train one with `leap train-head --model ... --layer K` "
                            "or pass head=PATH")
    record = head_record(path)
    if record.get("kind") != "exit":
        raise SettingsError(f"{path} holds an EAGLE head, not an exit head (use --drafter eagle head={path})")
    if (record.get("hidden_size"), record.get("vocab_size")) != (model.config.hidden_size, model.vocab_size) \
            or int(record.get("layer", 0)) >= model.num_layers:
        raise SettingsError(f"the exit head at {path} was trained for {record.get('model', 'another model')}, not "
                            f"{model.name}; train one with `leap train-head --model {model.name} --layer K`")
    state = read_state(path)
    head = ExitHead.from_model(model, layer=int(record["layer"]), rank=int(record["rank"]),
                               vocab_ids=state["vocab_ids"])
    head.load_state_dict({k: v.to(model.dtype) if v.is_floating_point() else v for k, v in state.items()})
    head.record = record
    return head.eval()


# ---------------------------------------------------------------------------------------------- training
def exit_positions(data: DistillData, index: list[int]) -> list[tuple[int, int, int]]:
    """``(sequence, first, stop)`` per sequence: the positions ``t`` whose next token is an answer token
    (``t + 1 >= prompt length``) and whose next token exists; the head at ``t`` is scored on ``x_{t+1}``."""
    return [(i, max(data.prompt_lens[i] - 1, 0), len(data.tokens[i]) - 1) for i in index]


def _gather(data: DistillData, states: list[torch.Tensor], spans) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer-``k`` states and the verifier's top-layer features at ``spans``' positions, stacked."""
    xs = torch.cat([states[i][a:b] for i, a, b in spans])
    fs = torch.cat([data.features[i][a:b] for i, a, b in spans])
    return xs, fs


def exit_agreement(model: Any, head: ExitHead, xs: torch.Tensor, fs: torch.Tensor, batch: int = 2048) -> float:
    """Top-1 agreement of the head's draft with the verifier at the given positions."""
    weight = model.lm_head.weight.detach()[head.vocab_ids.to(model.device)].float()
    hits = 0
    with torch.no_grad():
        for s in range(0, len(xs), batch):
            x, f = xs[s:s + batch].to(model.device).float(), fs[s:s + batch].to(model.device).float()
            hits += int(((head(x) @ weight.T).argmax(-1) == (f @ weight.T).argmax(-1)).sum().item())
    return hits / max(len(xs), 1)


def train_exit_head(model: Any, data: DistillData, states: list[torch.Tensor], layer: int, *, rank: int = 256,
                    epochs: int = 4, lr: float = 1e-3, batch: int = 512, vocab_size: int = 8192, seed: int = 0,
                    checkpoint: Path | None = None, progress: bool = True, log=print) -> tuple[ExitHead, dict]:
    """Train an exit head on ``layer`` (module docstring); ``states[i]`` is sequence ``i``'s layer-``layer``
    input (:func:`leap.heads.data.layer_states`). Returns the head and a record of the run."""
    from leap.heads.train import adamw_cosine, distribution_loss, draft_vocabulary, training_step

    torch.manual_seed(seed)
    order = list(range(len(data.tokens)))
    random.Random(seed).shuffle(order)
    held = max(1, len(order) // 10)
    valid_x, valid_f = _gather(data, states, exit_positions(data, order[:held]))
    train_x, train_f = _gather(data, states, exit_positions(data, order[held:]))
    head = ExitHead.from_model(model, layer=layer, rank=rank,
                               vocab_ids=draft_vocabulary(model, data, vocab_size)).float()
    for p in model.hf_model.parameters():
        p.requires_grad_(False)
    head.requires_grad_(True)
    head.train()
    weight = model.lm_head.weight.detach()[head.vocab_ids.to(model.device)].float()
    steps = math.ceil(len(train_x) / batch)
    total = steps * epochs
    opt, sched = adamw_cosine(head.parameters(), lr, total)
    settings = {"layer": layer, "rank": rank, "epochs": epochs, "lr": lr, "batch": batch, "vocab_size": vocab_size,
                "seed": seed, "sequences": len(data.tokens)}
    state = torch.load(checkpoint, weights_only=False) if checkpoint is not None and Path(checkpoint).is_file() \
        else None
    if state is not None and state.get("settings") != settings:
        log(f"[train-head] {checkpoint} is from other settings; training from the start")
        state = None
    start_epoch, history = 0, []
    if state is not None:
        head.load_state_dict(state["head"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        start_epoch, history = state["epoch"], state["history"]
        log(f"[train-head] resumed after epoch {start_epoch}")
    before = exit_agreement(model, head, valid_x, valid_f) if state is None else state["untrained"]
    for epoch in range(start_epoch, epochs):
        perm = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(seed * 1000 + epoch))
        bar = _bar(steps, 0, f"epoch {epoch + 1}/{epochs}", progress, "step")
        for s in range(steps):
            rows = perm[s * batch:(s + 1) * batch]
            x = train_x[rows].to(model.device).float()
            f = train_f[rows].to(model.device).float()
            loss = distribution_loss(head(x), f, weight)
            training_step(opt, loss, head.parameters())
            sched.step()
            bar.update(1)
            if s % 20 == 0:
                bar.set_postfix_str(f"loss {loss.item():.3f}")
        bar.close()
        acc = exit_agreement(model, head, valid_x, valid_f)
        history.append({"epoch": epoch + 1, "heldout_top1": round(acc, 4)})
        if checkpoint is not None:  # saved before anything is printed: an interrupt loses no finished epoch
            torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                        "epoch": epoch + 1, "history": history, "settings": settings, "untrained": before},
                       checkpoint)
        log(f"[train-head] epoch {epoch + 1}: held-out top-1 agreement {acc:.3f} (untrained exit {before:.3f})")
    head.eval()
    record = {**settings, "kind": "exit", "draft_vocab_size": int(head.vocab_ids.numel()), "train_positions": len(train_x),
              "heldout_positions": len(valid_x), "heldout_top1_untrained": round(before, 4), "history": history,
              "losses": "cross-entropy to the verifier's distribution over the draft vocabulary"}
    return head.to(model.dtype), record
