"""``swift``: SWIFT's on-the-fly layer-set optimisation (Xia et al., ICLR 2025) as an agent.

SWIFT keeps the first and last layer and skips a fixed number ``m = floor(skippable * skip_ratio)``
(``skip_ratio`` 0.45) of the others, starting from every other layer. While optimising it proposes a
random skip set of that size (every ``bo_interval``-th proposal from Bayesian optimisation: a GP over
binary skip vectors with UCB, kappa 2.5) and scores it by *matchness*: the fraction of the last
``window`` generated tokens that a teacher-forced parallel draft under the candidate predicts
(:meth:`leap.core.modeling.probe.ContextProbe.matchness`); a candidate replaces the current set only if it
scores higher. Optimisation stops at matchness >= ``target`` (0.93), after ``max_tolerance`` (300)
non-improving proposals, or ``max_opt`` (1000) proposals; the state persists across prompts (one
search over the data stream). Drafting always uses the current best set.

Deviation, stated: SWIFT skips attention and MLP sub-layers independently; leap's configurations are
per layer, so this agent skips whole layers. It proposes only SKIP-able units of the space it gets
(``leap generate --method swift`` gives it every layer but the first and last). Without a probe
(model-free loops) candidates are scored by the step reward instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leap.core.config import LayerAction, LayerConfig
from leap.core.modeling.probe import Probe
from leap.redundancy.space import SearchSpace
from leap.search.base import SearchAgent, search_agents
from leap.search.agents.gp import GaussianProcess, upper_confidence_bound
from leap.search.history import SearchHistory

__all__ = ["SwiftAgent"]


@search_agents.register("swift")
class SwiftAgent(SearchAgent):
    """SWIFT: random search + BO over fixed-size skip sets, scored by matchness; state kept across prompts."""

    name = "swift"
    persistent = True  # searches once over the stream of prompts

    @classmethod
    def space_for(cls, trace, num_layers: int, *, zones: bool = True, groups: bool = True, **space_kwargs) -> SearchSpace:
        """Its own space: every layer but the first and last skippable (no zones, no groups)."""
        from leap.redundancy.build import baseline_space

        return baseline_space(num_layers)

    def __init__(self, space: SearchSpace, *, seed: int | None = None, skip_ratio: float = 0.45,
                 bo_interval: int = 25, target: float = 0.93, max_tolerance: int = 300, max_opt: int = 1000,
                 window: int = 32, min_context: int = 8, **kwargs: Any) -> None:
        super().__init__(space, seed=seed, **kwargs)
        self.units = [i for i, u in enumerate(space.units) if LayerAction.SKIP in u.actions]
        self.m = int(len(self.units) * skip_ratio)
        self.bo_interval, self.target, self.window = int(bo_interval), float(target), int(window)
        self.max_tolerance, self.max_opt, self.min_context = int(max_tolerance), int(max_opt), int(min_context)
        start = self.units[1::2][: self.m]
        self.current = tuple(start)
        self.score = -1.0
        self.proposals = 0
        self.tolerance = 0
        self.observed: list[tuple[tuple[int, ...], float]] = []
        self.probe = None
        self._candidate: tuple[int, ...] | None = None

    @property
    def optimising(self) -> bool:
        return self.score < self.target and self.tolerance < self.max_tolerance and self.proposals < self.max_opt

    def config_of(self, skip_units: tuple[int, ...]) -> LayerConfig:
        choice = list(self.space.full_choice)
        for i in skip_units:
            choice[i] = self.space.units[i].actions.index(LayerAction.SKIP)
        if not self.space.is_valid(choice):
            return self.space.to_config(self.space.full_choice)
        return self.space.to_config(choice)

    def _propose(self) -> tuple[int, ...]:
        self.proposals += 1
        if self.m == 0:
            return ()
        if self.proposals % self.bo_interval == 0 and len(self.observed) >= 4:
            X = np.array([[1.0 if u in s else 0.0 for u in self.units] for s, _ in self.observed])
            gp = GaussianProcess(lengthscale=2.0).fit(X, np.array([v for _, v in self.observed]))
            cands = [tuple(sorted(self.rng.choice(self.units, self.m, replace=False).tolist())) for _ in range(128)]
            Xc = np.array([[1.0 if u in s else 0.0 for u in self.units] for s in cands])
            mu, sigma = gp.predict(Xc)
            return cands[int(np.argmax(upper_confidence_bound(mu, sigma, 2.5)))]
        return tuple(sorted(self.rng.choice(self.units, self.m, replace=False).tolist()))

    def _consider(self, candidate: tuple[int, ...], score: float) -> None:
        self.observed.append((candidate, score))
        if score > self.score:
            self.current, self.score, self.tolerance = candidate, score, 0
        else:
            self.tolerance += 1

    def on_prompt(self, probe: Probe | None) -> None:
        self.probe = probe

    def ask(self, history: SearchHistory) -> LayerConfig | None:
        self._candidate = None
        if self.optimising:
            if self.probe is not None:
                if self.probe.committed > self.min_context:
                    if self.score < 0:  # score the starting set first
                        self._consider(self.current, self.probe.matchness(self.config_of(self.current), self.window))
                    candidate = self._propose()
                    self._consider(candidate, self.probe.matchness(self.config_of(candidate), self.window))
            else:
                self._candidate = self._propose()
                return self.config_of(self._candidate)
        return self.config_of(self.current)

    def tell(self, config: LayerConfig | None, reward: float, history: SearchHistory) -> None:
        super().tell(config, reward, history)
        if self._candidate is not None:  # model-free loop: the step reward scores the candidate
            self._consider(self._candidate, float(reward))
            self._candidate = None

    def converged(self, history: SearchHistory) -> bool:
        return not self.optimising

    def best(self, history: SearchHistory) -> LayerConfig | None:
        return self.config_of(self.current)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "current": list(self.current), "score": self.score,
                "proposals": self.proposals, "tolerance": self.tolerance,
                "observed": [[list(s), v] for s, v in self.observed]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.current, self.score = tuple(state["current"]), state["score"]
        self.proposals, self.tolerance = state["proposals"], state["tolerance"]
        self.observed = [(tuple(s), v) for s, v in state["observed"]]
