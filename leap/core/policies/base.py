"""Draft-length policies: when to stop drafting. A policy never verifies; it only says "stop".

Registered in :data:`draft_policies` (third parties: entry-point group ``leap.draft_policies``):

* ``fixed`` - draft exactly ``k`` tokens (the classic speculative decoding setting).
* ``confidence`` - stop once the draft token's probability falls below ``threshold`` (SWIFT uses 0.8
  with at most 25 tokens; Draft & Verify the same rule with its own threshold).
* ``adaptive-confidence`` - Draft & Verify's adaptive threshold (Zhang et al., ACL 2024, "Draft &
  Verify: Lossless LLM acceleration via self-speculative decoding"): after each round
  ``m <- 0.5 m + 0.5 accepted/drafted``; ``gamma' = gamma + 0.01`` if ``m < 0.9`` else ``gamma - 0.01``;
  ``gamma <- 0.9 gamma + 0.1 gamma'``.
* ``adaedl`` - AdaEDL (Agrawal et al., 2024): stop when ``1 - sqrt(gamma_e H(q_t)) < lambda`` with
  ``H`` the entropy of the draft distribution; ``lambda`` adapts online:
  ``AR <- b1 AR + (1-b1) n_acc/n_drafted``; ``lambda' = lambda + eps`` if ``AR < alpha`` else
  ``lambda - eps`` (unless the draft hit its maximum length); ``lambda <- b2 lambda + (1-b2) lambda'``.

* ``bandit`` - a UCB1 bandit choosing among the policies above every round (TapOut;
  :mod:`leap.core.policies.bandit`).

Lifecycle (who calls what): :class:`leap.core.decoding.decoder.DecodingSession` calls :meth:`DraftPolicy.begin`
before a drafting round, :meth:`DraftPolicy.should_stop` after every draft token with that token's
draft distribution, and :meth:`DraftPolicy.feedback` after verification with the accepted count.
Every policy also stops at ``max_draft`` tokens.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from leap.core.errors import SettingsError
from leap.core.registry import Registry

__all__ = [
    "DraftPolicy",
    "FixedLength",
    "ConfidenceThreshold",
    "AdaptiveConfidence",
    "AdaEDL",
    "draft_policies",
    "make_policy",
]

draft_policies: Registry[type[DraftPolicy]] = Registry("draft policy", "leap.draft_policies",
                                                       ("leap.core.policies.bandit",))


class DraftPolicy:
    """Base class: stop at ``max_draft`` tokens; subclasses add their own stopping rule.

    A minimal policy overrides :meth:`should_stop` only::

        @draft_policies.register("two")
        class Two(DraftPolicy):
            def should_stop(self, drafted, probs):
                return drafted >= 2
    """

    name = "base"
    #: whether the policy reads the machine's costs (:meth:`use_costs`, called before each drafting round)
    needs_costs = False
    #: the most host reads of device tensors (syncs on a GPU) :meth:`should_stop` makes per draft token;
    #: ``tests/core/runtime/test_host_reads.py`` holds every registered policy to it
    host_reads_per_token = 0

    def __init__(self, max_draft: int = 8) -> None:
        if int(max_draft) < 1:
            raise SettingsError(f"max_draft must be at least 1, got {max_draft}")
        self.max_draft = int(max_draft)

    def use_costs(self, costs, passes_per_token: int) -> None:
        """The machine's :class:`~leap.core.decoding.calibrate.Calibration` and the layer passes one draft token of
        this round's configuration costs; called before :meth:`begin` when ``needs_costs``."""

    def begin(self) -> None:
        """Called before each drafting round."""

    def should_stop(self, drafted: int, probs: torch.Tensor) -> bool:
        """Whether to stop after ``drafted`` tokens; ``probs`` is the last token's draft distribution."""
        return drafted >= self.max_draft

    def feedback(self, drafted: int, accepted: int) -> None:
        """Called after verification: ``accepted`` of ``drafted`` draft tokens were kept."""

    def state(self) -> dict[str, Any]:
        """Current adaptive parameters, reported in outcomes."""
        return {"max_draft": self.max_draft}


@draft_policies.register("fixed")
class FixedLength(DraftPolicy):
    """Always draft ``k`` tokens."""

    name = "fixed"

    def __init__(self, k: int = 4, max_draft: int | None = None) -> None:
        super().__init__(max_draft if max_draft is not None else k)
        self.max_draft = min(self.max_draft, int(k))


@draft_policies.register("confidence")
class ConfidenceThreshold(DraftPolicy):
    """Stop after a draft token whose probability is below ``threshold`` (SWIFT: 0.8)."""

    name = "confidence"
    host_reads_per_token = 1  # the draft token's probability

    def __init__(self, threshold: float = 0.8, max_draft: int = 8) -> None:
        super().__init__(max_draft)
        if not 0.0 <= threshold <= 1.0:
            raise SettingsError(f"threshold must be in [0, 1], got {threshold}")
        self.threshold = float(threshold)

    def should_stop(self, drafted: int, probs: torch.Tensor) -> bool:
        return drafted >= self.max_draft or probs.max().item() < self.threshold

    def state(self) -> dict[str, Any]:
        return {**super().state(), "threshold": self.threshold}


@draft_policies.register("adaptive-confidence")
class AdaptiveConfidence(ConfidenceThreshold):
    """Draft & Verify's confidence threshold ``gamma`` adapted to a target acceptance of 0.9."""

    name = "adaptive-confidence"

    def __init__(
        self, threshold: float = 0.6, max_draft: int = 8, target: float = 0.9, step: float = 0.01
    ) -> None:
        super().__init__(threshold, max_draft)
        self.target, self.step = float(target), float(step)
        self.m = target  # running acceptance rate

    def feedback(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        self.m = 0.5 * self.m + 0.5 * accepted / drafted
        gamma_prime = self.threshold + self.step if self.m < self.target else self.threshold - self.step
        self.threshold = min(1.0, max(0.0, 0.9 * self.threshold + 0.1 * gamma_prime))

    def state(self) -> dict[str, Any]:
        return {**super().state(), "acceptance": self.m}


@draft_policies.register("adaedl")
class AdaEDL(DraftPolicy):
    """Entropy-based early stop with an adaptive ``lambda`` (AdaEDL)."""

    name = "adaedl"
    host_reads_per_token = 1  # the draft distribution's entropy

    def __init__(
        self,
        lam: float = 0.4,
        max_draft: int = 8,
        gamma: float = 0.2,
        alpha: float = 0.9,
        eps: float = 0.01,
        beta1: float = 0.5,
        beta2: float = 0.9,
    ) -> None:
        super().__init__(max_draft)
        self.lam, self.gamma, self.alpha, self.eps = float(lam), float(gamma), float(alpha), float(eps)
        self.beta1, self.beta2 = float(beta1), float(beta2)
        self.acceptance = alpha

    def should_stop(self, drafted: int, probs: torch.Tensor) -> bool:
        if drafted >= self.max_draft:
            return True
        entropy = torch.special.entr(probs).sum().item()  # entr(0) = 0: no data-dependent mask, one read
        return 1.0 - math.sqrt(self.gamma * entropy) < self.lam

    def feedback(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        self.acceptance = self.beta1 * self.acceptance + (1 - self.beta1) * accepted / drafted
        if self.acceptance < self.alpha:
            lam_prime = self.lam + self.eps
        elif drafted < self.max_draft:
            lam_prime = self.lam - self.eps
        else:
            lam_prime = self.lam
        self.lam = self.beta2 * self.lam + (1 - self.beta2) * lam_prime

    def state(self) -> dict[str, Any]:
        return {**super().state(), "lambda": self.lam, "acceptance": self.acceptance}


def make_policy(policy: str | DraftPolicy, **kwargs: Any) -> DraftPolicy:
    """A policy instance from a registered name (with constructor ``kwargs``) or an instance."""
    if isinstance(policy, DraftPolicy):
        return policy
    return draft_policies.create(policy, **kwargs)
