"""``bandit``: the draft-length policy chosen per drafting round by a UCB1 bandit over other policies
(the TapOut idea: Sridhar et al., 2025, "TapOut: A Bandit-Based Approach to Dynamic Speculative
Decoding" - parameter-free stopping via a bandit over existing dynamic-speculation heuristics).

Arms: policy instances (default ``fixed`` k=2, ``fixed`` k=4, ``confidence``, ``adaptive-confidence``,
``adaedl``; any registered names via ``arms=[...]``). Each round :meth:`begin` picks the arm with
the highest ``mean + c sqrt(2 ln t / n)`` (untried arms first) and delegates ``should_stop`` to it;
:meth:`feedback` rewards the arm with committed tokens per unit of predicted step cost,
``(accepted + 1) / (c(drafted + 1) + drafted * draft_token)``, where ``c`` is the machine's calibrated
verification curve and ``draft_token`` one draft token's cost under the round's configuration (both
from :mod:`leap.core.decoding.calibrate`, handed over by the decoder through :meth:`use_costs`; ``draft_cost``
overrides ``draft_token`` by a fixed ratio), and forwards the feedback to the arm, so adaptive arms
keep adapting.

Who calls what: :class:`leap.core.decoding.decoder.DecodingSession` through the :class:`DraftPolicy` hooks;
``leap generate --draft-policy bandit``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from leap.core.errors import SettingsError
from leap.core.policies.base import DraftPolicy, draft_policies, make_policy
from leap.core.ucb1 import ucb1_choice

__all__ = ["BanditPolicy"]

DEFAULT_ARMS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("fixed", {"k": 2}), ("fixed", {"k": 4}), ("confidence", {}), ("adaptive-confidence", {}), ("adaedl", {}))


@draft_policies.register("bandit")
class BanditPolicy(DraftPolicy):
    """A UCB1 bandit choosing, every drafting round, which registered policy decides when to stop."""

    name = "bandit"

    needs_costs = True

    def __init__(self, arms: Sequence[str] | None = None, c: float = 0.5, draft_cost: float | None = None,
                 max_draft: int = 8) -> None:
        super().__init__(max_draft)
        if c < 0 or (draft_cost is not None and draft_cost < 0):
            raise SettingsError("bandit needs c >= 0 and draft_cost >= 0")
        specs = DEFAULT_ARMS if arms is None else tuple((a, {}) for a in arms)
        if any(name == "bandit" for name, _ in specs) or not specs:
            raise SettingsError("bandit: give one or more arms other than bandit itself")
        self.arms = [make_policy(name, max_draft=max_draft, **kw) for name, kw in specs]
        self.host_reads_per_token = max(a.host_reads_per_token for a in self.arms)
        self.labels = [name + "".join(f" {k}={v}" for k, v in kw.items()) for name, kw in specs]
        self.c = float(c)
        self.draft_cost = None if draft_cost is None else float(draft_cost)
        self._costs = None  # the Calibration, from use_costs
        self._draft_token = self.draft_cost
        self.counts = [0] * len(self.arms)
        self.sums = [0.0] * len(self.arms)
        self.current = 0

    def use_costs(self, costs, passes_per_token: int) -> None:
        self._costs = costs
        if self.draft_cost is None:
            self._draft_token = costs.draft_token(passes_per_token)

    def _cost(self, drafted: int) -> float:
        if self._draft_token is None:
            raise RuntimeError("bandit: no costs yet; the decoder calls use_costs() before each drafting round "
                               "(or give draft_cost=...)")
        verify = self._costs.verify(drafted + 1) if self._costs is not None else 1.0
        return verify + self._draft_token * drafted

    def begin(self) -> None:
        self.current = ucb1_choice(self.counts, self.sums, self.c)
        self.arms[self.current].begin()

    def should_stop(self, drafted: int, probs: torch.Tensor) -> bool:
        return self.arms[self.current].should_stop(drafted, probs)

    def feedback(self, drafted: int, accepted: int) -> None:
        self.counts[self.current] += 1
        self.sums[self.current] += (accepted + 1) / self._cost(drafted)
        self.arms[self.current].feedback(drafted, accepted)

    def state(self) -> dict[str, Any]:
        return {"max_draft": self.max_draft, "arms": self.labels, "counts": list(self.counts),
                "mean_reward": [s / n if n else None for s, n in zip(self.sums, self.counts)]}
