"""The drafter dimension of the search space: which drafter, with which small parameters, and (for
drafters that use the model's layers) which layer configuration.

A :class:`DrafterOption` is one drafter with fixed parameters, written ``name`` or
``name:key=value,key=value`` (``prompt-lookup:num_tokens=4``). :class:`JointSpace` extends LEAP's
:class:`~leap.redundancy.space.SearchSpace` with one more decision, the option index, appended to
every choice: ``(*unit_actions, option)``. Options that use layers (``layer-skip``, ``hybrid``) take
the unit actions as their :class:`~leap.core.config.LayerConfig`; model-free options ignore them
(their choices canonicalise to the full layer choice, so each model-free option is one point of the
space). An option with an exit layer ``k`` (``exit-head``, :meth:`~leap.core.drafters.base.Drafter.exit_layer_of`)
drafts with the layers below ``k`` only, so only the units reaching below ``k`` are its decisions: the others
canonicalise to EXECUTE, and each distinct draft is one point (:meth:`JointSpace.units_used`).
:meth:`JointSpace.to_config` returns a :class:`DraftChoice` - hashable, like a
``LayerConfig``, so agents record and compare them the same way. A choice with one action per unit
(no option index) means the first option, so agents written for layer spaces still work.

Pure Python (no torch): drafter *instances* are made and kept by the runner
(:class:`leap.search.runner.OnlineSearch`), which steps the session with
``session.step(choice.config, drafter=instance)``.

Who calls what: ``leap generate --method leap --drafters ...`` and the ``leap-drafters`` benchmark
method build a :class:`JointSpace` with :func:`with_drafters`; ``mcts``, ``ucb``, ``bayes`` and
``random`` search it jointly; the ``LeapDrafterSearch-v0`` environment exposes the option as one
more action dimension.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from leap.core.config import LayerConfig
from leap.core.errors import ConfigError, SettingsError
from leap.core.options import parse_spec
from leap.redundancy.space import SearchSpace

__all__ = ["DrafterOption", "DraftChoice", "JointSpace", "with_drafters", "parse_option", "DEFAULT_DRAFTERS",
           "usable_options", "expand_settings", "batch_options"]

# lowbit, cascade: the low-bit self-draft (issue 22); eagle: the model's trained head on its top layer, exit-head:
# a trained exit on layer L // 3 under the layer configuration below it (issue 19); both left out
# (usable_options) on models with none
DEFAULT_DRAFTERS = ("layer-skip", "prompt-lookup", "suffix", "gated", "hybrid:free=suffix", "stand",
                    "stand:shape=opt", "lowbit", "cascade", "eagle", "exit-head")


@dataclass(frozen=True)
class DrafterOption:
    """One drafter with fixed parameters; ``label`` is its string form."""

    name: str
    params: tuple[tuple[str, object], ...] = ()

    @property
    def label(self) -> str:
        return self.name + (":" + ",".join(f"{k}={_fmt(v)}" for k, v in self.params) if self.params else "")

    @property
    def kwargs(self) -> dict[str, object]:
        return dict(self.params)

    @property
    def uses_layers(self) -> bool:
        from leap.core.drafters import drafters

        return drafters.get(self.name).uses_layers and not (self.name == "hybrid" and self.kwargs.get("min_free", 1) == 0)

    def exit_layer(self, num_layers: int) -> int | None:
        """The drafter's exit layer on a model of ``num_layers`` layers (None: it drafts with all of them)."""
        return _exit_layer(self, num_layers)

    def __str__(self) -> str:
        return self.label


@functools.lru_cache(maxsize=256)
def _exit_layer(option: DrafterOption, num_layers: int) -> int | None:  # a head file's record is read once
    from leap.core.drafters import drafters

    return drafters.get(option.name).exit_layer_of(num_layers, **option.kwargs) if option.uses_layers else None


def _fmt(v: object) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def parse_option(text: str | DrafterOption) -> DrafterOption:
    """``name`` or ``name:key=value,...`` (JSON values, else strings) -> :class:`DrafterOption`."""
    if isinstance(text, DrafterOption):
        return text
    name, kwargs = parse_spec(text, separator=",", what="drafter option (e.g. prompt-lookup:num_tokens=4)")
    return DrafterOption(name, tuple(sorted(kwargs.items())))


@dataclass(frozen=True)
class DraftChoice:
    """What one search step runs: a drafter option and, if it uses layers, a layer configuration."""

    drafter: DrafterOption
    config: LayerConfig | None

    @property
    def layer_ratio(self) -> float | None:
        """The configuration's layer ratio, or None for a drafter without a layer budget: a model-free one, and an
        exit drafter (its draft runs the layers below its exit, a trained head reads them - the execute/skip
        band LEAP sets for layer-skip drafts is not its constraint; its configuration names every layer from the
        exit on EXECUTE, which would put it above any band)."""
        if self.config is None or self.drafter.exit_layer(self.config.num_layers) is not None:
            return None
        return self.config.layer_ratio

    def __str__(self) -> str:
        return self.drafter.label + (f"+{self.config}" if self.config is not None else "")


class JointSpace(SearchSpace):
    """A layer :class:`SearchSpace` times a list of :class:`DrafterOption` (see the module docstring)."""

    def __init__(self, layer_space: SearchSpace, options: Sequence[str | DrafterOption]) -> None:
        super().__init__(layer_space.units, metrics=layer_space.metrics)
        self._layers = layer_space
        self.options = tuple(parse_option(o) for o in options)
        if not self.options:
            raise SettingsError("a drafter search needs at least one drafter option")
        if len(set(self.options)) != len(self.options):
            raise SettingsError(f"drafter options repeat: {[o.label for o in self.options]}")
        self._used = tuple(self._units_below(o) for o in self.options)

    def _units_below(self, option: DrafterOption) -> int:
        if not option.uses_layers:
            return 0
        k = option.exit_layer(self.num_layers)
        return len(self.units) if k is None else sum(1 for u in self.units if u.layers[0] < k)

    def units_used(self, option: int) -> int:
        """How many leading units are option ``option``'s decisions: all for a drafter with all layers, those
        reaching below the exit layer for an exit drafter, none for a model-free one."""
        return self._used[option]

    # ----------------------------------------------------------------- views
    @property
    def layer_space(self) -> SearchSpace:
        return self._layers

    @property
    def action_counts(self) -> list[int]:
        return [*self.layer_space.action_counts, len(self.options)]

    @property
    def full_choice(self) -> tuple[int, ...]:
        return (*self.layer_space.full_choice, 0)

    def action_mask(self, max_actions: int | None = None) -> np.ndarray:
        width = max(3, len(self.options)) if max_actions is None else max_actions
        mask = np.zeros((len(self.units) + 1, width), dtype=np.int8)
        for i, n in enumerate(self.action_counts):
            mask[i, :n] = 1
        return mask

    # ----------------------------------------------------------------- choices
    def _split(self, choice: Sequence[int]) -> tuple[tuple[int, ...], int]:
        choice = tuple(int(a) for a in choice)
        if len(choice) == len(self.units):
            return choice, 0
        if len(choice) != len(self.units) + 1:
            raise ConfigError(f"a choice needs one action per decision unit ({len(self.units)}) plus a drafter "
                              f"option index, got {len(choice)} entries")
        if not 0 <= choice[-1] < len(self.options):
            raise ConfigError(f"drafter option index {choice[-1]} is out of range (0..{len(self.options) - 1})")
        return choice[:-1], choice[-1]

    def _canonical_layers(self, layers: Sequence[int], option: int) -> tuple[int, ...]:
        used = self._used[option]
        return (*layers[:used], *self.layer_space.full_choice[used:])

    def canonical(self, choice: Sequence[int]) -> tuple[int, ...]:
        """The choice with the unit actions that do not reach the option's draft reset to EXECUTE: all of them for
        a model-free option, those at or above the exit layer for an exit drafter."""
        layers, option = self._split(choice)
        return (*self._canonical_layers(layers, option), option)

    def is_valid(self, choice: Sequence[int]) -> bool:
        try:
            layers, option = self._split(choice)
        except ConfigError:
            return False
        return not self.options[option].uses_layers or self.layer_space.is_valid(self._canonical_layers(layers, option))

    def to_config(self, choice: Sequence[int]) -> DraftChoice:  # type: ignore[override]
        layers, option = self._split(choice)
        opt = self.options[option]
        config = self.layer_space.to_config(self._canonical_layers(layers, option)) if opt.uses_layers else None
        return DraftChoice(opt, config)

    def from_config(self, config: DraftChoice | LayerConfig) -> tuple[int, ...] | None:  # type: ignore[override]
        if isinstance(config, LayerConfig):
            config = DraftChoice(self.options[0], config if self.options[0].uses_layers else None)
        if config.drafter not in self.options:
            return None
        option = self.options.index(config.drafter)
        if config.config is None:
            return None if config.drafter.uses_layers else (*self.layer_space.full_choice, option)
        layers = self.layer_space.from_config(config.config)
        return None if layers is None else self.canonical((*layers, option))

    def sample(self, rng: np.random.Generator) -> tuple[int, ...]:
        """A drafter option uniformly, then (if it uses layers) a uniform valid layer choice, canonicalised (each
        distinct draft of an exit drafter has as many layer choices behind it, so it stays uniform)."""
        option = int(rng.integers(len(self.options)))
        layers = self.layer_space.sample(rng) if self.options[option].uses_layers else self.layer_space.full_choice
        return self.canonical((*layers, option))

    def _option_choices(self, option: int) -> Iterator[tuple[int, ...]]:
        """Option ``option``'s distinct valid layer choices (canonical)."""
        used, rest = self._used[option], self.layer_space.full_choice[self._used[option]:]
        for head in itertools.product(*(range(n) for n in self.layer_space.action_counts[:used])):
            if self.layer_space.is_valid((*head, *rest)):
                yield (*head, *rest)

    def _option_size(self, option: int) -> int:
        used = self._used[option]
        if not self.options[option].uses_layers:
            return 1
        if used == len(self.units):
            return self.layer_space.size()
        return math.prod(self.layer_space.action_counts[:used])  # a unit above the exit executes: all valid

    def size(self) -> int:
        """Distinct drafts: one per model-free option, one per layer choice below an exit option's exit layer."""
        return sum(self._option_size(i) for i in range(len(self.options)))

    def enumerate(self, limit: int = 1_000_000) -> Iterator[tuple[int, ...]]:
        if self.size() > limit:
            raise ValueError(f"the space has {self.size()} choices, more than limit={limit}")
        for option, opt in enumerate(self.options):
            if not opt.uses_layers:
                yield (*self.layer_space.full_choice, option)
            elif self._used[option] == len(self.units):
                for layers in self.layer_space.enumerate(limit):
                    yield (*layers, option)
            else:
                for layers in self._option_choices(option):
                    yield (*layers, option)

    def to_dict(self) -> dict:
        return {**self.layer_space.to_dict(), "drafters": [o.label for o in self.options], "size": self.size()}

    def __repr__(self) -> str:
        return f"JointSpace({len(self.units)} units x {len(self.options)} drafter options, size {self.size()})"


def with_drafters(space: SearchSpace, options: Sequence[str | DrafterOption] = DEFAULT_DRAFTERS) -> JointSpace:
    """LEAP's space with the drafter dimension added."""
    return JointSpace(space, options)


def expand_settings(options: Sequence[str | DrafterOption]) -> tuple[DrafterOption, ...]:
    """Each option times the values of its drafter's declared searchable settings
    (:attr:`~leap.core.drafters.base.Drafter.search_settings`) that the option does not fix: ``lowbit`` becomes
    ``lowbit:num_tokens=6``, ``lowbit:num_tokens=10``, ...; ``lowbit:num_tokens=8`` stays one option."""
    from leap.core.drafters import drafters

    out: list[DrafterOption] = []
    for option in (parse_option(o) for o in options):
        declared = {k: v for k, v in drafters.get(option.name).search_settings.items() if k not in option.kwargs}
        for values in itertools.product(*declared.values()):
            params = dict(option.params) | dict(zip(declared, values))
            expanded = DrafterOption(option.name, tuple(params.items()))
            if expanded not in out:
                out.append(expanded)
    return tuple(out)


def option_fingerprints(options: Sequence[DrafterOption], model) -> dict[str, str]:
    """Label -> :meth:`~leap.core.drafters.base.Drafter.fingerprint` of each option for ``model``: what
    :meth:`leap.search.memory.SearchMemory.prune` checks the remembered options against."""
    from leap.core.drafters import drafters

    return {o.label: drafters.get(o.name).fingerprint(model, **o.kwargs) for o in options}


def usable_options(options: Sequence[str | DrafterOption], model) -> tuple[DrafterOption, ...]:
    """``options`` less those whose drafter says it cannot draft for ``model``
    (:meth:`~leap.core.drafters.base.Drafter.unavailable`), each left out with a warning giving its reason;
    a clear error if none is left."""
    import warnings

    from leap.core.drafters import drafters

    kept = []
    for option in (parse_option(o) for o in options):
        reason = drafters.get(option.name).unavailable(model, **option.kwargs)
        if reason is None:
            kept.append(option)
        else:
            warnings.warn(f"drafter option {option.label} left out of the search: {reason}", stacklevel=2)
    if not kept:
        raise SettingsError(f"none of the drafter options {[parse_option(o).label for o in options]} can draft "
                            f"for {getattr(model, 'name', 'this model')}")
    return tuple(kept)


def batch_options(options: Sequence[str | DrafterOption], model) -> tuple[DrafterOption, ...]:
    """The options a batch can draft with (issue 37: the drafter search at batch level), one per drafter: those whose
    drafter batches (:func:`leap.core.decoding.batch.batch_refusal`) and can draft for ``model``, the first option of
    each drafter kept (a batch's chain length is the bandit's cap, not the option's setting). Empty if none."""
    from leap.core.decoding.batch import batch_refusal
    from leap.core.drafters import drafters

    kept: dict[str, DrafterOption] = {}
    for option in (parse_option(o) for o in options):
        cls = drafters.get(option.name)
        if option.name not in kept and batch_refusal(cls) is None and cls.unavailable(model, **option.kwargs) is None:
            kept[option.name] = option
    return tuple(kept.values())


def option_count(space: SearchSpace) -> int:
    """How many drafter options a space has (0 for a plain layer space)."""
    return len(space.options)

