"""``mcts``: LEAP's zone-aware Monte Carlo tree search (Stage II).

Tree (LEAP, Zheng & Liu, ICML 2026; released code: HangerYang/Star, LEAP/): depth = number of
decision units, one level per unit in layer order; a node's children are the actions its unit's zone allows. One iteration:

1. **select** from the root while the node is fully expanded: the child maximising
   ``UCB = Q + c sqrt(ln N_parent / n) - penalty`` (``c = 3``; unvisited children first); ``penalty``
   (0.3) applies to a child whose partial configuration can no longer reach the layer-ratio band;
2. **expand** the first node that is not: add all its children, take a random one;
3. **roll out** the remaining units: EXECUTE with probability 0.40, else SKIP where allowed (never
   REPEAT);
4. **simulate**: the runner measures one real draft/verify step under the configuration;
5. **backpropagate** the shaped reward (sums; ``Q`` = mean) along the path.

Reward shaping (:func:`shaped_reward`, LEAP's): ``s < 1 -> 4(s-1)``; ``1 <= s < 1.05 -> -0.2``;
``1.05..1.4 -> s-1``; ``> 1.4 -> 1.2(s-1)``; plus up to 0.6 for a layer ratio near the target inside
the band; minus 8x the excess above / 3x the deficit below the band; ratio above ``max_ratio`` -> -5;
clipped to [-5, 5]. The layer ratio is ``(#EXECUTE + 2 #REPEAT) / L``. The best configuration is the
highest mean shaped reward among configurations inside the band (LEAP). Defaults are the paper's
(band [0.40, 0.50] for Llama-3-8B); a small model whose thin layers cannot be skipped much (SmolLM2)
needs a higher band, e.g. ``ratio_band=(0.75, 0.95), max_ratio=1.0``.

Tree statistics live in one plain structure (:class:`Tree`), selection is a pure function of
(tree, node, rng), as in mctx.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leap.core.config import LayerAction, LayerConfig
from leap.redundancy.space import SearchSpace
from leap.search.base import SearchAgent, search_agents
from leap.search.history import SearchHistory

__all__ = ["MCTSSettings", "Tree", "MCTSAgent", "shaped_reward", "select_child"]


@dataclass(frozen=True)
class MCTSSettings:
    """LEAP's MCTS and reward-shaping settings (paper defaults)."""

    c: float = 3.0
    ratio_band: tuple[float, float] = (0.40, 0.50)
    ratio_target: float = 0.45
    ratio_penalty: float = 0.3
    max_ratio: float = 0.8
    rollout_execute_prob: float = 0.40
    shaping: bool = True

    def __post_init__(self) -> None:
        lo, hi = self.ratio_band
        if not 0 <= lo <= hi:
            raise ValueError(f"ratio_band must be (lo, hi) with 0 <= lo <= hi, got {self.ratio_band}")
        if self.c < 0 or not 0 <= self.rollout_execute_prob <= 1:
            raise ValueError("c must be >= 0 and rollout_execute_prob in [0, 1]")


def shaped_reward(s: float, ratio: float | None, settings: MCTSSettings) -> float:
    """LEAP's shaped reward of speedup ``s`` at layer ratio ``ratio`` (module docstring); ``ratio=None``
    (a model-free drafter, no layer budget) shapes the speedup only."""
    if not settings.shaping:
        return s - 1.0
    if ratio is None:
        return float(np.clip(4.0 * (s - 1.0) if s < 1.0 else -0.2 if s < 1.05 else
                             (s - 1.0) if s <= 1.4 else 1.2 * (s - 1.0), -5.0, 5.0))
    if ratio > settings.max_ratio:
        return -5.0
    if s < 1.0:
        r = 4.0 * (s - 1.0)
    elif s < 1.05:
        r = -0.2
    elif s <= 1.4:
        r = s - 1.0
    else:
        r = 1.2 * (s - 1.0)
    lo, hi = settings.ratio_band
    if lo <= ratio <= hi:
        half = max((hi - lo) / 2, 1e-9)
        r += 0.6 * max(0.0, 1.0 - abs(ratio - settings.ratio_target) / half)
    elif ratio > hi:
        r -= 8.0 * (ratio - hi)
    else:
        r -= 3.0 * (lo - ratio)
    return float(np.clip(r, -5.0, 5.0))


@dataclass
class Tree:
    """Node statistics; node 0 is the root. ``action[n]`` is the action index taken into ``n``."""

    parent: list[int] = field(default_factory=lambda: [-1])
    action: list[int] = field(default_factory=lambda: [-1])
    depth: list[int] = field(default_factory=lambda: [0])
    children: list[dict[int, int]] = field(default_factory=lambda: [{}])
    visits: list[int] = field(default_factory=lambda: [0])
    value_sum: list[float] = field(default_factory=lambda: [0.0])

    def add_child(self, node: int, action: int) -> int:
        self.parent.append(node)
        self.action.append(action)
        self.depth.append(self.depth[node] + 1)
        self.children.append({})
        self.visits.append(0)
        self.value_sum.append(0.0)
        child = len(self.parent) - 1
        self.children[node][action] = child
        return child

    def q(self, node: int) -> float:
        return self.value_sum[node] / self.visits[node] if self.visits[node] else 0.0

    def path(self, node: int) -> list[int]:
        """Action indices from the root to ``node``."""
        out = []
        while self.parent[node] >= 0:
            out.append(self.action[node])
            node = self.parent[node]
        return out[::-1]

    def backpropagate(self, node: int, value: float) -> None:
        while node >= 0:
            self.visits[node] += 1
            self.value_sum[node] += value
            node = self.parent[node]


def _ratio_bounds(space: SearchSpace, prefix: list[int]) -> tuple[float, float] | None:
    """Smallest and largest layer ratio reachable from a partial choice (a tree path); None when the
    path chose a model-free drafter (no layer ratio to keep in the band)."""
    if space.options:
        if not prefix:
            return None
        option = space.options[prefix[0]]
        if not option.uses_layers or option.exit_layer(space.num_layers) is not None:
            return None  # model-free, or an exit drafter: no layer ratio to keep in the band (DraftChoice.layer_ratio)
        prefix = prefix[1:]
    lo = hi = 0
    for i, unit in enumerate(space.units):
        options = [unit.actions[prefix[i]]] if i < len(prefix) else list(unit.actions)
        passes = [sum(a.passes for a in unit.apply(a)) for a in options]
        lo += min(passes)
        hi += max(passes)
    return lo / space.num_layers, hi / space.num_layers


def select_child(tree: Tree, node: int, space: SearchSpace, settings: MCTSSettings, rng: np.random.Generator) -> int:
    """UCB selection among ``node``'s children (pure function of tree, node and rng)."""
    kids = list(tree.children[node].items())
    unvisited = [child for _, child in kids if tree.visits[child] == 0]
    if unvisited:
        return unvisited[int(rng.integers(len(unvisited)))]
    log_n = math.log(max(tree.visits[node], 1))
    lo_band, hi_band = settings.ratio_band
    scores = []
    for _, child in kids:
        bounds = _ratio_bounds(space, tree.path(child))
        penalty = settings.ratio_penalty if bounds and (bounds[0] > hi_band or bounds[1] < lo_band) else 0.0
        scores.append(tree.q(child) + settings.c * math.sqrt(log_n / tree.visits[child]) - penalty)
    best = max(scores)
    ties = [child for (_, child), s in zip(kids, scores) if s == best]
    return ties[int(rng.integers(len(ties)))]


@search_agents.register("mcts")
class MCTSAgent(SearchAgent):
    """LEAP's zone-aware MCTS over decision units, rewarded by real draft/verify steps."""

    name = "mcts"
    accepts_foreign_trials = True  # tell() backs up only what ask() expanded; history keeps the rest (best())

    def __init__(self, space: SearchSpace, *, seed: int | None = None, settings: MCTSSettings | None = None,
                 **kwargs: Any) -> None:
        fields = set(MCTSSettings.__dataclass_fields__)
        own = {k: kwargs.pop(k) for k in list(kwargs) if k in fields}
        super().__init__(space, seed=seed, **kwargs)
        self.settings = settings or MCTSSettings(**own)
        self.tree = Tree()
        self._pending: dict[LayerConfig, list[int]] = {}

    # Tree levels: with a drafter dimension (JointSpace) level 0 picks the drafter option and the
    # unit levels follow, as many as are the option's decisions: a model-free option's node is a leaf (its
    # layer actions do not matter), an exit drafter's subtree ends at the last unit below its exit layer.
    @property
    def _offset(self) -> int:
        return 1 if self.space.options else 0

    def _leaf_depth(self, path: list[int]) -> int:
        if self._offset and path:
            return 1 + self.space.units_used(path[0])
        return len(self.space.units) + self._offset

    def _num_actions(self, depth: int) -> int:
        if self._offset and depth == 0:
            return len(self.space.options)
        return len(self.space.units[depth - self._offset].actions)

    def _rollout(self, path: list[int]) -> list[int]:
        choice = list(path[self._offset:])
        for unit in self.space.units[len(choice):]:
            if self.rng.random() < self.settings.rollout_execute_prob or LayerAction.SKIP not in unit.actions:
                choice.append(0)
            else:
                choice.append(unit.actions.index(LayerAction.SKIP))
        if self._offset:
            option = path[0] if path else int(self.rng.integers(len(self.space.options)))
            return list(self.space.canonical([*choice, option]))
        return choice

    def ask(self, history: SearchHistory) -> LayerConfig | None:
        tree, node = self.tree, 0
        while tree.children[node] and tree.depth[node] < self._leaf_depth(tree.path(node)):  # 1. select
            node = select_child(tree, node, self.space, self.settings, self.rng)
        if tree.depth[node] < self._leaf_depth(tree.path(node)):  # 2. expand
            for a in range(self._num_actions(tree.depth[node])):
                tree.add_child(node, a)
            kids = list(tree.children[node].values())
            node = kids[int(self.rng.integers(len(kids)))]
        choice = self._rollout(tree.path(node))  # 3. roll out
        if not self.space.is_valid(choice):
            choice = list(self.space.full_choice[: len(choice) - self._offset])
            if self._offset:
                choice.append(tree.path(node)[0] if tree.path(node) else 0)
        config = self.space.to_config(choice)
        self._pending.setdefault(config, []).append(node)
        return config

    def tell(self, config: LayerConfig | None, reward: float, history: SearchHistory) -> None:
        super().tell(config, reward, history)
        nodes = self._pending.get(config) if config is not None else None
        if not nodes:
            return
        node = nodes.pop(0)
        self.tree.backpropagate(node, shaped_reward(reward, config.layer_ratio, self.settings))  # 5.

    def best(self, history: SearchHistory) -> LayerConfig | None:
        lo, hi = self.settings.ratio_band
        scored: dict[LayerConfig, list[float]] = {}
        for t in history:
            ratio = None if t.config is None else t.config.layer_ratio
            if t.config is not None and (ratio is None or lo <= ratio <= hi):
                scored.setdefault(t.config, []).append(shaped_reward(t.reward, t.config.layer_ratio, self.settings))
        if not scored:
            return None
        return max(scored, key=lambda c: sum(scored[c]) / len(scored[c]))

    def state_dict(self) -> dict[str, Any]:
        t = self.tree
        return {**super().state_dict(), "tree": {
            "parent": list(t.parent), "action": list(t.action), "depth": list(t.depth),
            "children": [dict(c) for c in t.children], "visits": list(t.visits), "value_sum": list(t.value_sum)}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        t = state["tree"]
        self.tree = Tree(list(t["parent"]), list(t["action"]), list(t["depth"]),
                         [{int(k): v for k, v in c.items()} for c in t["children"]], list(t["visits"]),
                         list(t["value_sum"]))
        self._pending = {}
