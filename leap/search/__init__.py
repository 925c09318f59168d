"""leap.search: interchangeable agents that pick layer configurations online (LEAP Stage II).

The agent API (:mod:`leap.search.base`), the history and rewards are pure python/numpy; the runner
(:mod:`leap.search.runner`) drives an agent on real decoding; :mod:`leap.search.drafter_space` adds the
drafter dimension (``JointSpace``).

May import: :mod:`leap.core` and :mod:`leap.redundancy`.
"""

from __future__ import annotations

from leap.search.base import SearchAgent, make_agent, search_agents
from leap.search.history import SearchHistory, Trial
from leap.search.reward import CostModelSpeedup, MeasuredSpeedup, make_reward

__all__ = ["SearchAgent", "make_agent", "search_agents", "SearchHistory", "Trial", "MeasuredSpeedup",
           "CostModelSpeedup", "make_reward"]
