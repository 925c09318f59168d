"""Per-layer draft configurations: which layers the draft executes, skips or repeats.

A :class:`LayerConfig` is one :class:`LayerAction` per decoder layer. It is immutable and hashable,
so search agents use it as a dictionary key and the benchmark stores its string form in results.

String forms (both parse with :meth:`LayerConfig.parse`):

* compact, one letter per layer: ``"EEESSEEER"`` (E = execute, S = skip, R = repeat, Q = execute at low
  precision);
* sparse, for the command line: ``"skip=5,6,7;repeat=28;low=10-12"`` (needs ``num_layers``); ranges such as
  ``skip=5-9`` are accepted.

LOW (Q) semantics: the draft runs the layer once with its weights quantised (weight-only int8 by default,
:mod:`leap.core.modeling.low_bit_layers`) instead of the full-precision weights - the per-layer form of
a low-bit self-draft (QSpec, ML-SpecQD quantise the whole draft). Its draft cache entries are rolled back
like every draft entry, so the verifier only ever sees full-precision keys/values.

REPEAT semantics (who defines it: :class:`leap.core.modeling.layers.LayerStack`): the draft runs a repeated
layer twice in a row on the same position. The second pass attends to the layer's committed cache
(the full model's keys/values for earlier positions) plus its own keys/values for the draft token,
which *replace* the first pass's entry. Every draft entry is rolled back before verification, so
repeats never reach the verifier's cache.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from leap.core.errors import ConfigError

__all__ = ["LayerAction", "LayerConfig"]


class LayerAction(enum.Enum):
    """What the draft does with one decoder layer (LEAP's action set)."""

    EXECUTE = "E"
    SKIP = "S"
    REPEAT = "R"
    LOW = "Q"  # executed once with low-precision weights

    @property
    def passes(self) -> int:
        """How many times the draft runs the layer for one token (0, 1 or 2)."""
        return {"E": 1, "S": 0, "R": 2, "Q": 1}[self.value]

    @classmethod
    def from_letter(cls, letter: str) -> LayerAction:
        try:
            return cls(letter.upper())
        except ValueError:
            raise ConfigError(
                f"unknown layer action {letter!r}: use E (execute), S (skip), R (repeat) or Q (low precision)"
            ) from None


@dataclass(frozen=True)
class LayerConfig:
    """One action per decoder layer; the full model is ``LayerConfig.full(num_layers)``.

    Raises:
        ConfigError: if ``actions`` is empty, holds something other than :class:`LayerAction`, or
            executes no layer at all (a draft of zero layers predicts from the embedding alone).
    """

    actions: tuple[LayerAction, ...]

    def __post_init__(self) -> None:
        actions = tuple(self.actions)
        if not actions:
            raise ConfigError("a LayerConfig needs one action per layer; got none")
        for a in actions:
            if not isinstance(a, LayerAction):
                raise ConfigError(f"layer actions must be LayerAction values, got {a!r}")
        if all(a is LayerAction.SKIP for a in actions):
            raise ConfigError(
                "this configuration skips every layer; execute at least one layer "
                "(or use plain decoding: --method ar)"
            )
        object.__setattr__(self, "actions", actions)

    # ----------------------------------------------------------------- constructors
    @classmethod
    def full(cls, num_layers: int) -> LayerConfig:
        """Every layer executed once: the draft is the full model."""
        return cls((LayerAction.EXECUTE,) * _check_num_layers(num_layers))

    @classmethod
    def from_sets(
        cls, num_layers: int, *, skip: Iterable[int] = (), repeat: Iterable[int] = (), low: Iterable[int] = ()
    ) -> LayerConfig:
        """Execute every layer except those in ``skip`` (skipped), ``repeat`` (run twice) and ``low`` (run
        at low precision)."""
        n = _check_num_layers(num_layers)
        sets = {"skip": set(skip), "repeat": set(repeat), "low": set(low)}
        for name, layers in sets.items():
            bad = sorted(i for i in layers if not 0 <= i < n)
            if bad:
                raise ConfigError(f"{name} names layers {bad} but the model has layers 0..{n - 1}")
        names = list(sets)
        for a, first in enumerate(names):
            for second in names[a + 1:]:
                both = sorted(sets[first] & sets[second])
                if both:
                    raise ConfigError(f"layers {both} are in both {first} and {second}; choose one action per layer")
        action = {i: LayerAction.SKIP for i in sets["skip"]}
        action.update({i: LayerAction.REPEAT for i in sets["repeat"]})
        action.update({i: LayerAction.LOW for i in sets["low"]})
        return cls(tuple(action.get(i, LayerAction.EXECUTE) for i in range(n)))

    @classmethod
    def parse(cls, text: str, num_layers: int | None = None) -> LayerConfig:
        """Parse the compact (``"EESR..."``) or sparse (``"skip=1,2;repeat=5"``) form.

        Raises:
            ConfigError: unknown letters or keys, a wrong length when ``num_layers`` is given.
        """
        text = text.strip()
        if "=" in text:
            if num_layers is None:
                raise ConfigError(f"the sparse form {text!r} needs num_layers to know the model depth")
            sets: dict[str, list[int]] = {"skip": [], "repeat": [], "low": []}
            for part in filter(None, (p.strip() for p in text.split(";"))):
                key, _, values = part.partition("=")
                key = key.strip().lower()
                if key not in sets:
                    raise ConfigError(f"unknown key {key!r} in {text!r}: use skip=..., repeat=... and low=...")
                sets[key].extend(parse_layer_list(values))
            return cls.from_sets(num_layers, **sets)
        config = cls(tuple(LayerAction.from_letter(c) for c in text if not c.isspace()))
        if num_layers is not None and config.num_layers != num_layers:
            raise ConfigError(
                f"configuration {text!r} has {config.num_layers} actions but the model has "
                f"{num_layers} layers; give exactly one letter per layer"
            )
        return config

    # ----------------------------------------------------------------- views
    @property
    def num_layers(self) -> int:
        return len(self.actions)

    @property
    def skipped(self) -> tuple[int, ...]:
        return tuple(i for i, a in enumerate(self.actions) if a is LayerAction.SKIP)

    @property
    def repeated(self) -> tuple[int, ...]:
        return tuple(i for i, a in enumerate(self.actions) if a is LayerAction.REPEAT)

    @property
    def low(self) -> tuple[int, ...]:
        """The layers the draft runs at low precision."""
        return tuple(i for i, a in enumerate(self.actions) if a is LayerAction.LOW)

    @property
    def layer_passes(self) -> int:
        """Layer evaluations per draft token (#EXECUTE + 2 #REPEAT)."""
        return sum(a.passes for a in self.actions)

    @property
    def layer_ratio(self) -> float:
        """LEAP's layer ratio: (#EXECUTE + 2 #REPEAT) / L."""
        return self.layer_passes / self.num_layers

    @property
    def exact_prefix(self) -> int:
        """Number of leading layers the draft runs exactly as the full model does.

        Layers before the first SKIP, REPEAT or LOW see the same inputs in draft and verification, so their
        cache entries and outputs for draft tokens can be kept (see ``SelfSpecDecoder(reuse_prefix=)``).
        """
        for i, a in enumerate(self.actions):
            if a is not LayerAction.EXECUTE:
                return i
        return self.num_layers

    @property
    def is_full(self) -> bool:
        return self.exact_prefix == self.num_layers

    def check_num_layers(self, num_layers: int) -> None:
        """Raise :class:`ConfigError` unless the config fits a model of ``num_layers`` layers."""
        if self.num_layers != num_layers:
            raise ConfigError(
                f"configuration {self} has {self.num_layers} actions but the model has {num_layers} "
                "layers; give exactly one action per layer"
            )

    def __str__(self) -> str:
        return "".join(a.value for a in self.actions)

    def __len__(self) -> int:
        return len(self.actions)


def parse_layer_list(text: str) -> list[int]:
    """Parse ``"5,6,9-11"`` into ``[5, 6, 9, 10, 11]``; raises :class:`ConfigError` on bad input."""
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                out.extend(range(int(lo), int(hi) + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise ConfigError(f"bad layer list {text!r}: use numbers and ranges like 5,6,9-11") from None
    return out


def _check_num_layers(num_layers: int) -> int:
    if num_layers < 1:
        raise ConfigError(f"num_layers must be positive, got {num_layers}")
    return num_layers


