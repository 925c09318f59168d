"""The structured search space search agents explore: decision units (groups), their zone and actions.

A *choice* is one action index per unit (``0`` is always EXECUTE, so ``space.full_choice`` is plain
decoding's layer set). :meth:`SearchSpace.to_config` turns it into a
:class:`~leap.core.config.LayerConfig`: EXECUTE runs every layer of the unit; SKIP skips them but
keeps the first layer of a multi-layer unit (LEAP); REPEAT repeats every layer of the unit.

Distinct choices give distinct configurations, so :meth:`SearchSpace.size` (valid choices) is also
the number of reachable configurations. A choice is invalid only if it skips every layer, which
needs every unit to be a single SKIP-able layer.

Ablation variants (LEAP Table 2): ``zones=False`` makes every layer middle-like (EXECUTE/SKIP),
``groups=False`` makes one unit per layer.

Pure numpy; no torch. Who calls what: search agents (``leap.search``) call :meth:`sample`,
:meth:`to_config`, :meth:`is_valid`; the environment uses :attr:`action_counts` and
:meth:`action_mask`; ``leap redundancy`` prints :meth:`to_dict`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from leap.core.config import LayerAction, LayerConfig
from leap.core.errors import ConfigError
from leap.redundancy.groups import layerwise_groups, leap_groups
from leap.redundancy.zones import ZONE_ACTIONS, Zone, ZoneSettings, assign_zones

__all__ = ["DecisionUnit", "SearchSpace", "build_search_space", "with_low_bit"]

Choice = tuple[int, ...]


@dataclass(frozen=True)
class DecisionUnit:
    """Consecutive layers of one zone that take one action together."""

    layers: tuple[int, ...]
    zone: Zone
    actions: tuple[LayerAction, ...]

    def __post_init__(self) -> None:
        if not self.layers or list(self.layers) != list(range(self.layers[0], self.layers[-1] + 1)):
            raise ConfigError(f"a decision unit needs consecutive layers, got {self.layers}")
        if not self.actions or self.actions[0] is not LayerAction.EXECUTE:
            raise ConfigError("a decision unit's first action must be EXECUTE")

    def apply(self, action: LayerAction) -> list[LayerAction]:
        if action is LayerAction.SKIP and len(self.layers) > 1:
            return [LayerAction.EXECUTE] + [LayerAction.SKIP] * (len(self.layers) - 1)
        return [action] * len(self.layers)


class SearchSpace:
    """Decision units covering layers ``0..L-1`` exactly once, in order.

    The typed seam for a drafter dimension (:class:`leap.search.drafter_space.JointSpace`): ``options``
    (the drafter options searched jointly with the layers; empty here), ``layer_space`` (the layer part;
    this space itself here), :meth:`canonical` and :meth:`units_used`. Agents read these instead of checking the class.
    """

    options: tuple = ()

    def __init__(self, units: Sequence[DecisionUnit], metrics: Mapping[str, Sequence[float]] | None = None) -> None:
        self.units = tuple(units)
        covered = [l for u in self.units for l in u.layers]
        if covered != list(range(len(covered))):
            raise ConfigError(f"decision units must cover layers 0..L-1 once, in order; got {covered}")
        self.num_layers = len(covered)
        self.metrics = {k: [float(x) for x in v] for k, v in (metrics or {}).items()}

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_groups(cls, zones: Sequence[Zone], groups: Sequence[Sequence[int]], **kwargs) -> SearchSpace:
        units = []
        for group in groups:
            zone_set = {zones[l] for l in group}
            if len(zone_set) != 1:
                raise ConfigError(f"group {list(group)} crosses zones {sorted(z.value for z in zone_set)}")
            zone = zones[group[0]]
            units.append(DecisionUnit(tuple(group), zone, ZONE_ACTIONS[zone]))
        return cls(units, **kwargs)

    # ----------------------------------------------------------------- views
    @property
    def layer_space(self) -> SearchSpace:
        """The layer part of the space (a joint space's layers; this space itself here)."""
        return self

    def canonical(self, choice: Sequence[int]) -> tuple[int, ...]:
        """The representative of the choices that decode alike (every choice is its own here)."""
        return tuple(int(a) for a in choice)

    def units_used(self, option: int) -> int:
        """How many leading units are decisions of drafter option ``option`` (every unit here: no options)."""
        return len(self.units)

    @property
    def zones(self) -> list[Zone]:
        return [u.zone for u in self.units for _ in u.layers]

    @property
    def groups(self) -> list[list[int]]:
        return [list(u.layers) for u in self.units]

    @property
    def action_counts(self) -> list[int]:
        """Actions per unit (the environment's MultiDiscrete ``nvec``)."""
        return [len(u.actions) for u in self.units]

    @property
    def full_choice(self) -> Choice:
        """Every unit EXECUTE: the draft is the full model."""
        return (0,) * len(self.units)

    def action_mask(self, max_actions: int = 3) -> np.ndarray:
        """``[units, max_actions]`` booleans: which action slots each unit allows."""
        mask = np.zeros((len(self.units), max_actions), dtype=np.int8)
        for i, n in enumerate(self.action_counts):
            mask[i, :n] = 1
        return mask

    # ----------------------------------------------------------------- choices
    def _check(self, choice: Sequence[int]) -> None:
        if len(choice) != len(self.units):
            raise ConfigError(f"a choice needs one action per decision unit ({len(self.units)}), got {len(choice)}")
        for i, (a, unit) in enumerate(zip(choice, self.units)):
            if not 0 <= int(a) < len(unit.actions):
                raise ConfigError(
                    f"unit {i} (layers {list(unit.layers)}, {unit.zone.value} zone) allows actions "
                    f"{[x.name for x in unit.actions]}; index {a} is out of range"
                )

    def actions_of(self, choice: Sequence[int]) -> list[LayerAction]:
        self._check(choice)
        out: list[LayerAction] = []
        for a, unit in zip(choice, self.units):
            out.extend(unit.apply(unit.actions[int(a)]))
        return out

    def is_valid(self, choice: Sequence[int]) -> bool:
        try:
            return any(a is not LayerAction.SKIP for a in self.actions_of(choice))
        except ConfigError:
            return False

    def to_config(self, choice: Sequence[int]) -> LayerConfig:
        """The :class:`LayerConfig` of a choice; raises :class:`ConfigError` if it is invalid."""
        return LayerConfig(tuple(self.actions_of(choice)))

    def from_config(self, config: LayerConfig) -> Choice | None:
        """The choice that gives ``config``, or None if the space cannot express it."""
        config.check_num_layers(self.num_layers)
        choice = []
        for unit in self.units:
            target = [config.actions[l] for l in unit.layers]
            hit = [i for i, a in enumerate(unit.actions) if unit.apply(a) == target]
            if not hit:
                return None
            choice.append(hit[0])
        return tuple(choice)

    def sample(self, rng: np.random.Generator) -> Choice:
        """A uniformly random valid choice (rejection of the at most one invalid choice)."""
        while True:
            choice = tuple(int(rng.integers(n)) for n in self.action_counts)
            if self.is_valid(choice):
                return choice

    def sample_config(self, rng: np.random.Generator) -> LayerConfig:
        return self.to_config(self.sample(rng))

    def size(self) -> int:
        """Number of valid choices (= distinct reachable configurations)."""
        total = math.prod(self.action_counts)
        all_skip_possible = all(len(u.layers) == 1 and LayerAction.SKIP in u.actions for u in self.units)
        return total - (1 if all_skip_possible else 0)

    def enumerate(self, limit: int = 1_000_000) -> Iterator[Choice]:
        """Every valid choice (refuses spaces larger than ``limit``)."""
        if math.prod(self.action_counts) > limit:
            raise ValueError(f"the space has {math.prod(self.action_counts)} choices, more than limit={limit}")
        for choice in itertools.product(*(range(n) for n in self.action_counts)):
            if self.is_valid(choice):
                yield tuple(choice)

    def to_dict(self) -> dict:
        return {
            "num_layers": self.num_layers,
            "zones": [z.value for z in self.zones],
            "groups": self.groups,
            "actions": [[a.name for a in u.actions] for u in self.units],
            "size": self.size(),
            "metrics": self.metrics,
        }

    def __repr__(self) -> str:
        return f"SearchSpace({len(self.units)} units over {self.num_layers} layers, size {self.size()})"


def build_search_space(
    residual_ratio: Sequence[float],
    ear_gain: Sequence[float],
    settings: ZoneSettings = ZoneSettings(),
    *,
    zones: bool = True,
    groups: bool = True,
    metrics: Mapping[str, Sequence[float]] | None = None,
) -> SearchSpace:
    """LEAP's search space from R and Delta L; ``zones=False`` / ``groups=False`` give the ablations."""
    L = len(residual_ratio)
    zone_list = assign_zones(residual_ratio, ear_gain, settings) if zones else [Zone.MIDDLE] * L
    group_list = leap_groups(zone_list, residual_ratio, ear_gain) if groups else layerwise_groups(zone_list)
    return SearchSpace.from_groups(zone_list, group_list, metrics=metrics)


def with_low_bit(space: SearchSpace, zones: Sequence[Zone] = (Zone.MIDDLE, Zone.FINAL)) -> SearchSpace:
    """``space`` with the per-layer precision action: every unit in ``zones`` may also run its layers at
    low precision (:attr:`LayerAction.LOW`, appended after the unit's own actions, so choice indices of the
    original actions are unchanged). Early-zone layers stay exact (LEAP keeps them executed)."""
    units = [DecisionUnit(u.layers, u.zone, u.actions + (LayerAction.LOW,))
             if u.zone in zones and LayerAction.LOW not in u.actions else u for u in space.units]
    return SearchSpace(units, metrics=space.metrics)
