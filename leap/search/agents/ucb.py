"""``ucb``: a UCB1 bandit (Auer et al., 2002) over a small set of candidate configurations.

Arms: plain decoding (``None``) plus ``n_arms`` nested configurations that skip the 1, 2, ...
most redundant SKIP-able decision units, ranked by the space's redundancy metric (``cosine``, higher
= more redundant, when the space carries it; else in layer order from the middle of the network).
Why whole configurations and not one bandit per unit: per-unit bandits assume the units' effects on
acceptance add up, which they do not (skipping two adjacent layers hurts far more than twice one), and
with a budget of ~40 real steps only a handful of arms can be tried more than once. Nested skip sets
order the arms from cheap-and-safe to aggressive, and the plain arm lets the bandit choose plain
decoding outright when no draft pays.

With a drafter dimension (:class:`~leap.search.drafter_space.JointSpace`) each model-free drafter
option is one more arm and each option that uses layers (``layer-skip``, ``hybrid``) is paired with
the nested skip sets.

Every arm is tried once, in order, before any is repeated; then ``argmax mean + c sqrt(2 ln t / n)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leap.core.config import LayerAction, LayerConfig
from leap.core.ucb1 import ucb1_choice
from leap.redundancy.space import SearchSpace
from leap.search.base import SearchAgent, search_agents
from leap.search.drafter_space import DraftChoice
from leap.search.history import SearchHistory

__all__ = ["UCBAgent", "nested_skip_arms"]


def nested_skip_arms(space: SearchSpace, n_arms: int, metric: str = "cosine") -> list[LayerConfig]:
    """Configurations skipping the 1..n most redundant SKIP-able units (valid ones only, no repeats)."""
    skippable = [i for i, u in enumerate(space.units) if LayerAction.SKIP in u.actions]
    values = space.metrics.get(metric)
    if values is not None:
        score = {i: float(np.mean([values[l] for l in space.units[i].layers])) for i in skippable}
        order = sorted(skippable, key=lambda i: -score[i])
    else:
        mid = space.num_layers / 2
        order = sorted(skippable, key=lambda i: abs(space.units[i].layers[0] - mid))
    arms: list[LayerConfig] = []
    choice = list(space.full_choice)
    for i in order:
        choice[i] = space.units[i].actions.index(LayerAction.SKIP)
        if space.is_valid(choice):
            config = space.to_config(choice)
            if config not in arms:
                arms.append(config)
        if len(arms) >= n_arms:
            break
    return arms


def _arms(space: SearchSpace, n_arms: int, metric: str) -> list:
    """Nested skip sets; with a drafter dimension, each model-free option is one arm and each option
    that uses layers gets the nested skip sets, canonicalised (an exit drafter's units from its exit layer on
    execute) and without repeats."""
    if not space.options:
        return nested_skip_arms(space, n_arms, metric)
    layered = nested_skip_arms(space.layer_space, n_arms, metric)
    arms: list = []
    for i, option in enumerate(space.options):
        for config in layered if option.uses_layers else [None]:
            arm = DraftChoice(option, None) if config is None else \
                space.to_config([*space.layer_space.from_config(config), i])
            if arm not in arms:
                arms.append(arm)
    return arms


@search_agents.register("ucb")
class UCBAgent(SearchAgent):
    """UCB1 over plain decoding and nested skip sets of the most redundant units."""

    name = "ucb"
    seeded = False  # deterministic: the same proposals whatever the seed

    def __init__(self, space: SearchSpace, *, seed: int | None = None, n_arms: int = 8, c: float = 1.0,
                 metric: str = "cosine", **kwargs: Any) -> None:
        super().__init__(space, seed=seed, **kwargs)
        self.c = float(c)
        self.arms: list[LayerConfig | DraftChoice | None] = [None, *_arms(space, n_arms, metric)]
        self.counts = [0] * len(self.arms)
        self.sums = [0.0] * len(self.arms)

    def _index(self, config: LayerConfig | None) -> int | None:
        try:
            return self.arms.index(config)
        except ValueError:
            return None

    def ask(self, history: SearchHistory) -> LayerConfig | None:
        return self.arms[ucb1_choice(self.counts, self.sums, self.c, self.rng)]

    def tell(self, config: LayerConfig | None, reward: float, history: SearchHistory) -> None:
        super().tell(config, reward, history)
        arm = self._index(config)
        if arm is not None:
            self.counts[arm] += 1
            self.sums[arm] += float(reward)

    def converged(self, history: SearchHistory) -> bool:
        return all(self.counts) and super().converged(history)

    def best(self, history: SearchHistory) -> LayerConfig | None:
        tried = [i for i, n in enumerate(self.counts) if n]
        if not tried:
            return None
        return self.arms[max(tried, key=lambda i: self.sums[i] / self.counts[i])]

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "counts": list(self.counts), "sums": list(self.sums)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.counts, self.sums = list(state["counts"]), list(state["sums"])
