"""``clasp``: CLaSP's dynamic-programming layer selection (ACL 2025) as an agent.

Choose ``M`` layers to skip so that the draft's top hidden state stays closest (cosine) to the full
model's, using the full model's per-layer states ``h*_i`` of the last verified token (from
:meth:`leap.core.modeling.probe.ContextProbe.target_states`). ``g[i, j]`` is the best hidden state after the
first ``i`` layers with ``j`` skipped: ``g[i, 0] = h*_i``; for ``j >= 1`` either execute layer
``i-1`` on ``g[i-1, j]`` or skip it from ``g[i-1, j-1]``, whichever is closer to ``h*_i``;
backtracking gives the skip set. The DP re-runs every ``interval`` steps (CLaSP: after each
verification); it costs about ``M`` forwards of one token, measured as search overhead.

Only single-layer SKIP-able units can be skipped (``leap generate --method clasp`` gives it every
layer but the first and last). Without a probe the agent skips the ``M`` units the space's
``cosine`` metric ranks most redundant.
"""

from __future__ import annotations

from typing import Any

from leap.core.config import LayerAction, LayerConfig
from leap.core.modeling.probe import Probe
from leap.redundancy.space import SearchSpace
from leap.search.base import SearchAgent, search_agents
from leap.search.history import SearchHistory

__all__ = ["ClaspAgent", "clasp_dp"]


def clasp_dp(targets: list, run_layer, skippable: set[int], M: int) -> list[int]:
    """CLaSP's DP. ``targets[i]`` = h*_i (input of layer i; ``targets[L]`` the final output), torch
    tensors; ``run_layer(i, h)`` runs layer ``i`` on ``h``. Returns the skipped layers (at most ``M``)."""
    import torch

    L = len(targets) - 1

    def cos(a, b) -> float:
        return torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item()

    g: dict = {(i, 0): targets[i] for i in range(L + 1)}
    came: dict[tuple[int, int], str] = {}
    for i in range(1, L + 1):
        for j in range(1, min(i, M) + 1):
            options = []
            if (i - 1, j) in g:
                options.append(("exec", run_layer(i - 1, g[(i - 1, j)])))
            if (i - 1) in skippable and (i - 1, j - 1) in g:
                options.append(("skip", g[(i - 1, j - 1)]))
            if options:
                kind, state = max(options, key=lambda o: cos(o[1], targets[i]))
                g[(i, j)], came[(i, j)] = state, kind
    j = max((j for j in range(M + 1) if (L, j) in g), default=0)
    skipped, i = [], L
    while i > 0 and j > 0:
        if came[(i, j)] == "skip":
            skipped.append(i - 1)
            j -= 1
        i -= 1
    return sorted(skipped)


@search_agents.register("clasp")
class ClaspAgent(SearchAgent):
    """CLaSP: skip set from a DP on hidden-state cosine similarity, re-run every ``interval`` steps."""

    name = "clasp"
    seeded = False  # deterministic: the same proposals whatever the seed
    persistent = True  # searches once over the stream of prompts

    @classmethod
    def space_for(cls, trace, num_layers: int, *, zones: bool = True, groups: bool = True, **space_kwargs) -> SearchSpace:
        """Its own space: every layer but the first and last skippable (no zones, no groups)."""
        from leap.redundancy.build import baseline_space

        return baseline_space(num_layers)

    def __init__(self, space: SearchSpace, *, seed: int | None = None, num_skip: int = 4, interval: int = 1,
                 **kwargs: Any) -> None:
        super().__init__(space, seed=seed, **kwargs)
        self.num_skip, self.interval = int(num_skip), max(1, int(interval))
        self.unit_of = {u.layers[0]: i for i, u in enumerate(space.units)
                        if len(u.layers) == 1 and LayerAction.SKIP in u.actions}
        self.probe = None
        self.steps = 0
        self.current = self._static()

    def _config(self, layers: list[int]) -> LayerConfig:
        choice = list(self.space.full_choice)
        for l in layers:
            i = self.unit_of[l]
            choice[i] = self.space.units[i].actions.index(LayerAction.SKIP)
        return self.space.to_config(choice) if self.space.is_valid(choice) else self.space.to_config(self.space.full_choice)

    def _static(self) -> LayerConfig:
        values = self.space.metrics.get("cosine")
        layers = list(self.unit_of)
        if values is not None:
            layers.sort(key=lambda l: -values[l])
        else:
            self.rng.shuffle(layers)
        return self._config(sorted(layers[: self.num_skip]))

    def on_prompt(self, probe: Probe | None) -> None:
        self.probe, self.steps = probe, 0

    def ask(self, history: SearchHistory) -> LayerConfig | None:
        if self.probe is not None and self.steps % self.interval == 0 and self.probe.committed > 1:
            targets, pos = self.probe.target_states()
            skipped = clasp_dp(targets, lambda i, h: self.probe.run_layer(i, h, pos), set(self.unit_of), self.num_skip)
            self.current = self._config(skipped)
        self.steps += 1
        return self.current

    def converged(self, history: SearchHistory) -> bool:
        return False  # CLaSP keeps adapting after every verification

    def best(self, history: SearchHistory) -> LayerConfig | None:
        return self.current

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "current": str(self.current), "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.current, self.steps = LayerConfig.parse(state["current"]), state["steps"]
