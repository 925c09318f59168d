"""The search history: every (configuration, outcome, reward) the runner measured, read-only to agents.

As in Optuna, history belongs to the runner (the "study"), not to the agent: agents read it, so they
can be swapped or reseeded mid-run, and an agent's own structures (an MCTS tree, a GP) are caches.

Who calls what: :class:`leap.search.runner.OnlineSearch` (and the Gymnasium environment) append
trials with :meth:`SearchHistory.record`; agents read :attr:`SearchHistory.trials` and the helpers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from leap.core.config import LayerConfig

__all__ = ["Trial", "SearchHistory"]


@dataclass(frozen=True)
class Trial:
    """One measured draft/verify iteration.

    Attributes:
        config: the draft configuration (None = a plain decoding step).
        reward: the runner's reward (measured or cost-model speedup).
        committed / drafted / accepted: tokens of the step.
        time_s: the step's wall time.
    """

    iteration: int
    config: LayerConfig | None
    reward: float
    committed: int
    drafted: int
    accepted: int
    time_s: float


class SearchHistory:
    """Append-only list of :class:`Trial`; agents get a read-only view."""

    def __init__(self) -> None:
        self._trials: list[Trial] = []

    @property
    def trials(self) -> tuple[Trial, ...]:
        return tuple(self._trials)

    def __len__(self) -> int:
        return len(self._trials)

    def __iter__(self) -> Iterator[Trial]:
        return iter(tuple(self._trials))

    def record(self, config: LayerConfig | None, reward: float, *, committed: int = 0, drafted: int = 0,
               accepted: int = 0, time_s: float = 0.0) -> Trial:
        """Append a trial (runner only) and return it."""
        trial = Trial(len(self._trials), config, float(reward), committed, drafted, accepted, time_s)
        self._trials.append(trial)
        return trial

    def mean_rewards(self) -> dict[LayerConfig | None, tuple[float, int]]:
        """``{config: (mean reward, count)}`` over all trials."""
        sums: dict[LayerConfig | None, list[float]] = {}
        for t in self._trials:
            sums.setdefault(t.config, []).append(t.reward)
        return {c: (sum(v) / len(v), len(v)) for c, v in sums.items()}

    def best(self) -> tuple[LayerConfig | None, float] | None:
        """The configuration with the highest mean reward (ties: the earliest tried), or None."""
        means = self.mean_rewards()
        if not means:
            return None
        config = max(means, key=lambda c: means[c][0])
        return config, means[config][0]
