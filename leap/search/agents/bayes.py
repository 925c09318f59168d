"""``bayes``: Bayesian optimisation over the per-unit actions (GP + expected improvement).

A choice is encoded as one number per decision unit (action index / (actions - 1), so 0 = EXECUTE);
after ``n_init`` uniform proposals, a GP (:mod:`leap.search.agents.gp`) is fitted to the mean reward of
every configuration tried, and the proposal is the candidate with the highest expected improvement
among ``n_candidates`` uniform samples and single-unit mutations of the best choice so far. Draft &
Verify optimises its skip set the same way, offline; here it runs online on measured steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leap.core.config import LayerConfig
from leap.redundancy.space import SearchSpace
from leap.search.base import SearchAgent, search_agents
from leap.search.agents.gp import GaussianProcess, expected_improvement
from leap.search.history import SearchHistory

__all__ = ["BayesAgent", "encode_choice"]


def encode_choice(space: SearchSpace, choice) -> np.ndarray:
    """GP features: each unit's action index scaled to [0, 1]; a drafter option (JointSpace) one-hot."""
    if space.options:
        choice = space.canonical(choice)
        units = [a / max(n - 1, 1) for a, n in zip(choice[:-1], space.layer_space.action_counts)]
        return np.array(units + [float(choice[-1] == i) for i in range(len(space.options))], dtype=float)
    return np.array([a / max(n - 1, 1) for a, n in zip(choice, space.action_counts)], dtype=float)


@search_agents.register("bayes")
class BayesAgent(SearchAgent):
    """GP-EI over per-unit actions; the first ``n_init`` proposals are uniform."""

    name = "bayes"

    def __init__(self, space: SearchSpace, *, seed: int | None = None, n_init: int = 6, n_candidates: int = 256,
                 lengthscale: float = 1.0, **kwargs: Any) -> None:
        super().__init__(space, seed=seed, **kwargs)
        self.n_init, self.n_candidates = int(n_init), int(n_candidates)
        self.gp = GaussianProcess(lengthscale=lengthscale)

    def _mutations(self, choice) -> list[tuple[int, ...]]:
        out = []
        for i, n in enumerate(self.space.action_counts):
            for a in range(n):
                if a != choice[i]:
                    c = list(choice)
                    c[i] = a
                    if self.space.is_valid(c):
                        out.append(tuple(c))
        return out

    def ask(self, history: SearchHistory) -> LayerConfig | None:
        means = {c: m for c, (m, _) in history.mean_rewards().items() if c is not None}
        tried = {c: self.space.from_config(c) for c in means}
        tried = {c: ch for c, ch in tried.items() if ch is not None}
        if len(tried) < self.n_init:
            return self.space.sample_config(self.rng)
        X = np.stack([encode_choice(self.space, ch) for ch in tried.values()])
        y = np.array([means[c] for c in tried])
        self.gp.fit(X, y)
        best_choice = tried[max(tried, key=lambda c: means[c])]
        candidates = {self.space.sample(self.rng) for _ in range(self.n_candidates)}
        candidates.update(self._mutations(best_choice))
        candidates = sorted(candidates)
        mu, sigma = self.gp.predict(np.stack([encode_choice(self.space, c) for c in candidates]))
        ei = expected_improvement(mu, sigma, float(np.max(y)))
        return self.space.to_config(candidates[int(np.argmax(ei))])
