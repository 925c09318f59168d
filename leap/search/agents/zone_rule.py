"""``zone-rule``: LEAP's zones and groups with a fixed rule instead of search (the "w/o MCTS" ablation).

The rule: SKIP every middle-zone unit that allows it (keeping the first layer of multi-layer groups,
as LEAP's SKIP does), EXECUTE everything else. It proposes that one configuration every time.
"""

from __future__ import annotations

from leap.core.config import LayerAction, LayerConfig
from leap.redundancy.zones import Zone
from leap.search.base import SearchAgent, search_agents
from leap.search.history import SearchHistory

__all__ = ["ZoneRuleAgent", "zone_rule_choice"]


def zone_rule_choice(space) -> list[int]:
    """The rule's action index per decision unit of ``space`` (a SearchSpace or a JointSpace, whose
    drafter option takes its first choice); the full model where the rule is not a valid point. The
    Optuna and Nevergrad agents start their searches here, as LEAP's MCTS does."""
    units = space.layer_space.units
    choice = [u.actions.index(LayerAction.SKIP) if u.zone is Zone.MIDDLE and LayerAction.SKIP in u.actions else 0
              for u in units]
    choice += [0] * (len(space.action_counts) - len(choice))
    return choice if space.is_valid(choice) else list(space.full_choice)


@search_agents.register("zone-rule")
class ZoneRuleAgent(SearchAgent):
    """Skip every middle-zone unit, execute the rest (no search)."""

    name = "zone-rule"
    seeded = False  # deterministic: the same proposals whatever the seed

    def ask(self, history: SearchHistory) -> LayerConfig | None:
        return self.space.to_config(zone_rule_choice(self.space))

    def converged(self, history: SearchHistory) -> bool:
        return len(history) >= 1
