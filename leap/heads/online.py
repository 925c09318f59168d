"""Online self-distillation of a feature head during generation (DVI / OSD family).

DVI (Draft, Verify, and Improve; 2025) and online speculative decoding (OSD, Liu et al., 2024) keep
training the drafter on what verification reveals for free: every verified position ``t`` comes with the
verifier's own top-layer feature ``f_t``, so the triple ``(f_t, x_{t+1}) -> f_{t+1}`` and the verifier's
next-token distribution ``softmax(W f_{t+1})`` are exact training targets - the same ones offline training
(:mod:`leap.heads.train`) uses, here from the prompt being answered.

:class:`OnlineDistiller` runs one optimiser step every ``every`` newly verified positions, teacher-forced
over the last ``window`` verified positions (a causal pass of the head over that window, as in offline
training), with the distribution loss of offline training: cross-entropy of the head's draft distribution
against the verifier's over the draft vocabulary (DVI's KL stage; the constant entropy term aside, the
same gradient). At most ``max_updates`` steps per prompt: the cost is capped, and it is inside the
decoding step's measured time, since the drafter calls :meth:`update` from its proposal. The optimiser
is torch's fused AdamW, whose step counts stay on the parameters' device: an update reads nothing back
to the host (the foreach AdamW reads each parameter's step count with ``.item()``; the registry's
host-read test caught it).

Lossless by construction and checked by test: only the head's own parameters change (the model's weights,
the LM head rows and the committed tokens are never written), and the verifier decides every token.

Who calls what: :class:`leap.heads.drafter.Eagle` with ``online=True`` builds one per head and calls
:meth:`update` at the start of every proposal; the drafter then re-feeds the last ``window`` positions of
its cache (entries older than that keep the keys and values of earlier weights - a drafting approximation,
never a correctness one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from leap.core.errors import SettingsError
from leap.heads.head import FeatureHead
from leap.heads.train import distribution_loss, teacher_forced, training_step

__all__ = ["OnlineDistiller"]


class OnlineDistiller:
    """Trains ``head`` on verified positions while it drafts (module docstring)."""

    def __init__(self, model: Any, head: FeatureHead, *, lr: float = 1e-3, every: int = 16, window: int = 32,
                 max_updates: int = 64) -> None:
        self.check(lr, every, window, max_updates)
        self.model, self.head = model, head
        self.every, self.window, self.max_updates = int(every), int(window), int(max_updates)
        if any(p.is_inference() for p in head.parameters()):
            raise SettingsError("online learning: the head's parameters were made under torch.inference_mode() "
                                "and cannot be trained; build or load the head outside it")
        with torch.inference_mode(False):
            head.requires_grad_(True)
            self.weight = model.lm_head.weight.detach()[head.vocab_ids].clone().float()  # draft vocabulary rows
            self.opt = torch.optim.AdamW(list(head.parameters()), lr=lr, weight_decay=0.0, fused=True)
        self.updates = 0  # this prompt's
        self.trained_upto = 0  # verified positions when the last update ran
        self.last_loss: torch.Tensor | None = None  # on the device: reading it is the caller's choice

    @staticmethod
    def check(lr: float, every: int, window: int, max_updates: int) -> None:
        if not lr > 0 or every < 1 or window < 2 or max_updates < 0:
            raise SettingsError(f"online learning: lr > 0, every >= 1, window >= 2, max_updates >= 0; got "
                                f"{lr}, {every}, {window}, {max_updates}")

    def begin(self) -> None:
        """A new prompt: the per-prompt cap starts again (the head keeps what it learned)."""
        self.updates, self.trained_upto = 0, 0

    def due(self, known: int) -> bool:
        return known - self.trained_upto >= self.every and known >= 2 and \
            (not self.max_updates or self.updates < self.max_updates)

    def update(self, tokens: Sequence[int], features: torch.Tensor, known: int) -> bool:
        """One optimiser step on the last ``window`` of the ``known`` verified positions (``features[:known]``,
        final-normed) if ``every`` new ones arrived since the last; -> whether the head changed."""
        if not self.due(known):
            return False
        start = max(0, known - self.window)
        head = self.head
        with torch.inference_mode(False), torch.enable_grad():
            feats = features[start:known].clone().to(self.weight.dtype).unsqueeze(0)  # [1, T, H]
            ids = torch.as_tensor(list(tokens[start:known]), dtype=torch.long, device=feats.device).view(1, -1)
            pred = teacher_forced(self.model, head, ids, feats, None)  # teacher-forced, exactly as offline training
            loss = distribution_loss(pred, feats[:, 1:], self.weight)
            training_step(self.opt, loss, head.parameters())
        self.updates += 1
        self.trained_upto = known
        self.last_loss = loss.detach()
        return True
