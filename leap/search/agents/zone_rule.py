"""``zone-rule``: LEAP's zones and groups with a fixed rule instead of search (the "w/o MCTS" ablation).

The rule: SKIP every middle-zone unit that allows it (keeping the first layer of multi-layer groups,
as LEAP's SKIP does), EXECUTE everything else. It proposes that one configuration every time.
"""

from __future__ import annotations

from leap.core.config import LayerAction, LayerConfig
from leap.redundancy.zones import Zone
from leap.search.base import SearchAgent, search_agents
from leap.search.history import SearchHistory

__all__ = ["ZoneRuleAgent"]


@search_agents.register("zone-rule")
class ZoneRuleAgent(SearchAgent):
    """Skip every middle-zone unit, execute the rest (no search)."""

    name = "zone-rule"

    def ask(self, history: SearchHistory) -> LayerConfig | None:
        choice = [
            u.actions.index(LayerAction.SKIP) if u.zone is Zone.MIDDLE and LayerAction.SKIP in u.actions else 0
            for u in self.space.units
        ]
        return self.space.to_config(choice) if self.space.is_valid(choice) else self.space.to_config(self.space.full_choice)

    def converged(self, history: SearchHistory) -> bool:
        return len(history) >= 1
