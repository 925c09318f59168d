"""Training an EAGLE feature head by self-distillation (``leap train-head``).

Data: :mod:`leap.heads.data` (the model's own answers to leap's seed prompts, with their features).
Loss, per answer position ``t`` (teacher forcing: the head reads the verifier's true ``f_t``):

* **distribution** (EAGLE's classification loss, here the main one): cross-entropy of the head's draft
  distribution ``softmax(W f_hat_{t+1})`` against the verifier's ``softmax(W f_{t+1})``, both over the draft
  vocabulary ``W`` (the most frequent tokens of the answers) - what acceptance depends on;
* **feature** (EAGLE's regression loss, weight ``feature_weight``): smooth-L1 between ``f_hat_{t+1}`` and
  ``f_{t+1}``, each dimension divided by its standard deviation over the data (unstandardised, a few
  outlier dimensions dominate it);
* EAGLE's input noise on ``f_t`` (uniform, ``noise`` times each dimension's deviation), so the head
  learns to read its own imperfect predictions when it drafts further.

AdamW, linear warm-up then cosine decay, gradients clipped at 1. A held-out tenth of the sequences
gives the head's teacher-forced top-1 agreement with the verifier (the first draft token's acceptance)
after every epoch. A checkpoint after every epoch (``<out>.ckpt``) lets an interrupted run resume;
everything is deterministic for a seed on one machine.

Who calls what: ``leap train-head`` (:mod:`leap.cli.train_head`) calls :func:`train_head`, then
:func:`leap.heads.head.save_head`.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from leap.heads.data import DistillData, _bar
from leap.heads.head import FeatureHead, causal_mask

__all__ = ["train_head", "draft_vocabulary", "agreement", "distribution_loss", "teacher_forced", "adamw_cosine",
           "training_step"]


def draft_vocabulary(model: Any, data: DistillData, size: int) -> torch.Tensor:
    """The ``size`` most frequent tokens of the data (answers and prompts), plus the EOS tokens."""
    counts: Counter[int] = Counter()
    for tokens in data.tokens:
        counts.update(tokens.tolist())
    ids = {t for t, _ in counts.most_common(size)} | set(model.eos_token_ids)
    return torch.tensor(sorted(ids), dtype=torch.long)


def _batches(lengths: list[int], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches, current, longest = [], [], 0
    for i in order:
        longest_if = max(longest, lengths[i])
        if current and longest_if * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, longest_if = [], lengths[i]
        current.append(i)
        longest = longest_if
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def _pad(data: DistillData, index: list[int], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """tokens ``[B, T]``, features ``[B, T, H]`` (float32), loss mask ``[B, T - 1]`` (target position has
    a verified feature and lies at or after the prompt's last token)."""
    longest = max(len(data.tokens[i]) for i in index)
    hidden = data.features[index[0]].shape[1]
    tokens = torch.zeros(len(index), longest, dtype=torch.long)
    feats = torch.zeros(len(index), longest, hidden)
    mask = torch.zeros(len(index), longest - 1, dtype=torch.bool)
    for row, i in enumerate(index):
        n, p = len(data.tokens[i]), data.prompt_lens[i]
        tokens[row, :n] = data.tokens[i]
        feats[row, :n] = data.features[i].float()
        mask[row, max(p - 2, 0): n - 1] = True  # targets f_{t+1} for t + 1 >= p - 1
    return tokens.to(device), feats.to(device), mask.to(device)


def teacher_forced(model: Any, head: FeatureHead, tokens, feats, noise: torch.Tensor | None):
    """Teacher-forced: f_hat for positions 1..T-1 from (f_t, e(x_{t+1})), t = 0..T-2."""
    inputs = feats[:, :-1]
    if noise is not None:
        inputs = inputs + (torch.rand_like(inputs) * 2 - 1) * noise
    embeds = model.embed_tokens(tokens[:, 1:]).detach()
    length = inputs.shape[1]
    position_ids = torch.arange(length, device=inputs.device).view(1, -1)
    pos = model.rotary_emb(embeds, position_ids=position_ids)
    mask = causal_mask(0, length, inputs.dtype, inputs.device)
    return head(inputs, embeds, pos, attention_mask=mask, position_ids=position_ids)


def distribution_loss(pred: torch.Tensor, target: torch.Tensor, weight: torch.Tensor,
                      mask: torch.Tensor | None = None) -> torch.Tensor:
    """EAGLE's classification loss: cross-entropy of the head's draft distribution ``softmax(W f_hat)``
    against the verifier's ``softmax(W f)`` over the draft vocabulary rows ``weight``, averaged over the
    positions ``mask`` keeps (all when None). Offline training and online learning both use it."""
    with torch.no_grad():
        p = torch.softmax(target @ weight.T, dim=-1)
    per_position = -(p * torch.log_softmax(pred @ weight.T, dim=-1)).sum(-1)
    if mask is None:
        return per_position.mean()
    m = mask.float()
    return (per_position * m).sum() / m.sum()


def adamw_cosine(params, lr: float, total: int):
    """AdamW (no weight decay) with a linear warm-up over the first 5% of ``total`` steps (at most 100), then
    cosine decay: the schedule of offline head training (EAGLE and exit heads)."""
    opt = torch.optim.AdamW(list(params), lr=lr, weight_decay=0.0)
    warm = max(1, min(100, total // 20))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    return opt, sched


def training_step(opt, loss: torch.Tensor, params) -> None:
    """One optimiser step on ``loss``, gradients clipped at norm 1 (offline and online training alike)."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()


def agreement(model: Any, head: FeatureHead, data: DistillData, index: list[int], batch_tokens: int = 4096) -> float:
    """Teacher-forced top-1 agreement of the head's draft with the verifier over ``index``'s answer positions."""
    weight = model.lm_head.weight.detach()[head.vocab_ids.to(model.device)]
    hits = total = 0
    with torch.no_grad():
        for batch in _batches([len(data.tokens[i]) for i in index], batch_tokens, random.Random(0)):
            tokens, feats, mask = _pad(data, [index[b] for b in batch], model.device)
            pred = teacher_forced(model, head, tokens, feats, None) @ weight.T
            target = feats[:, 1:] @ weight.T
            hits += int(((pred.argmax(-1) == target.argmax(-1)) & mask).sum().item())
            total += int(mask.sum().item())
    return hits / max(total, 1)


def train_head(model: Any, data: DistillData, *, epochs: int = 2, lr: float = 5e-4, batch_tokens: int = 4096,
               vocab_size: int = 8192, feature_weight: float = 0.2, noise: float = 0.1, seed: int = 0,
               checkpoint: Path | None = None, progress: bool = True, log=print) -> tuple[FeatureHead, dict]:
    """Train a head for ``model`` on ``data`` (module docstring). Returns the head and a record of the run."""
    torch.manual_seed(seed)
    rng = random.Random(seed)
    order = list(range(len(data.tokens)))
    random.Random(seed).shuffle(order)
    held = max(1, len(order) // 10)
    valid, train = order[:held], order[held:]
    head = FeatureHead.from_model(model, vocab_ids=draft_vocabulary(model, data, vocab_size)).float()
    head.requires_grad_(True)  # the copied layer inherits the target's frozen parameters
    head.vocab_ids.requires_grad_(False)
    head.train()
    for p in model.hf_model.parameters():
        p.requires_grad_(False)
    weight = model.lm_head.weight.detach()[head.vocab_ids.to(model.device)].float()
    every = torch.cat([f.float() for f in data.features])
    std = every.std(dim=0).clamp_min(1e-3).to(model.device)
    del every
    lengths = [len(data.tokens[i]) for i in train]
    steps_per_epoch = len(_batches(lengths, batch_tokens, random.Random(0)))
    total = steps_per_epoch * epochs
    opt, sched = adamw_cosine(head.parameters(), lr, total)
    start_epoch, history = 0, []
    settings = {"epochs": epochs, "lr": lr, "batch_tokens": batch_tokens, "vocab_size": vocab_size,
                "feature_weight": feature_weight, "noise": noise, "seed": seed, "sequences": len(data.tokens)}
    state = torch.load(checkpoint, weights_only=False) if checkpoint is not None and Path(checkpoint).is_file() \
        else None
    if state is not None and state.get("settings") != settings:
        log(f"[train-head] {checkpoint} is from other settings; training from the start")
        state = None
    if state is not None:
        head.load_state_dict(state["head"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        start_epoch, history = state["epoch"], state["history"]
        rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        log(f"[train-head] resumed after epoch {start_epoch}")
    before = agreement(model, head, data, valid, batch_tokens) if state is None else state.get("untrained")
    for epoch in range(start_epoch, epochs):
        bar = _bar(steps_per_epoch, 0, f"epoch {epoch + 1}/{epochs}", progress, "step")
        for batch in _batches(lengths, batch_tokens, rng):
            tokens, feats, mask = _pad(data, [train[b] for b in batch], model.device)
            pred = teacher_forced(model, head, tokens, feats, noise * std if noise else None)
            target = feats[:, 1:]
            m = mask.float()
            cls = distribution_loss(pred, target, weight, mask)
            reg = (F.smooth_l1_loss(pred / std, target / std, reduction="none").mean(-1) * m).sum() / m.sum()
            loss = cls + feature_weight * reg
            training_step(opt, loss, head.parameters())
            sched.step()
            bar.update(1)
            bar.set_postfix_str(f"cls {cls.item():.3f} feat {reg.item():.3f}")
        bar.close()
        acc = agreement(model, head, data, valid, batch_tokens)
        history.append({"epoch": epoch + 1, "heldout_top1": round(acc, 4)})
        if checkpoint is not None:  # saved before anything is printed: an interrupt loses no finished epoch
            torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                        "epoch": epoch + 1, "history": history, "rng": rng.getstate(), "settings": settings,
                        "torch_rng": torch.get_rng_state(), "untrained": before}, checkpoint)
        log(f"[train-head] epoch {epoch + 1}: held-out top-1 agreement {acc:.3f}")
    head.eval()
    record = {"epochs": epochs, "lr": lr, "batch_tokens": batch_tokens, "draft_vocab_size": int(head.vocab_ids.numel()),
              "feature_weight": feature_weight, "noise": noise, "seed": seed, "train_sequences": len(train),
              "heldout_sequences": len(valid), "heldout_top1_untrained": before, "history": history,
              "losses": "cross-entropy to the verifier's distribution + feature_weight * standardised smooth-L1"}
    return head.to(model.dtype), record
