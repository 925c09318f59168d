"""``random``: uniform proposals over the search space (the baseline every search must beat)."""

from __future__ import annotations

from leap.core.config import LayerConfig
from leap.search.base import SearchAgent, search_agents
from leap.search.history import SearchHistory

__all__ = ["RandomAgent"]


@search_agents.register("random")
class RandomAgent(SearchAgent):
    """Uniformly random valid configurations from the space."""

    name = "random"
    accepts_foreign_trials = True  # stateless: nothing to tell

    def ask(self, history: SearchHistory) -> LayerConfig | None:
        return self.space.sample_config(self.rng)
