"""One parser for the ``NAME:key=value`` strings of leap's flags.

Every place that takes a component and its constructor arguments as text uses it: ``--policy-arg
KEY=VALUE`` and friends (:func:`parse_assignments`), ``--method-arg METHOD:KEY=VALUE`` (one
assignment, so a value may hold commas: ``leap:ratio_band=[0.75,0.95]``), drafter options in
``--drafters "suffix;prompt-lookup:num_tokens=4,max_ngram=3"`` and the ``select`` drafter's candidates
``"suffix;prompt-lookup:num_tokens=4&max_ngram=3"`` (:func:`parse_spec`; the separator between
assignments differs only because a candidate list can itself sit inside a drafter option). Values
are JSON where they parse (numbers, booleans, lists), else strings.

Who calls what: :mod:`leap.cli`, :func:`leap.search.drafter_space.parse_option`,
:class:`leap.core.drafters.select.Select`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from leap.core.errors import SettingsError

__all__ = ["parse_value", "parse_assignments", "parse_spec"]


def parse_value(text: str) -> Any:
    """JSON if it parses (``4``, ``0.5``, ``true``, ``[0.75,0.95]``), else the stripped string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text.strip()


def parse_assignments(items: Iterable[str], what: str = "argument") -> dict[str, Any]:
    """``["k=v", ...]`` -> ``{k: value}``; a :class:`SettingsError` naming ``what`` for an item without ``=``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"{what} takes KEY=VALUE, got {item!r}")
        out[key.strip()] = parse_value(value)
    return out


def parse_spec(text: str, *, separator: str | None = ",", what: str = "option") -> tuple[str, dict[str, Any]]:
    """``NAME`` or ``NAME:k=v<separator>k=v`` -> ``(NAME, {k: value})``; ``separator=None``: one assignment."""
    name, _, rest = str(text).strip().partition(":")
    name = name.strip()
    if not name:
        raise SettingsError(f"{what} needs a name, got {text!r}")
    items = [rest] if separator is None else rest.split(separator)
    return name, parse_assignments([x for x in (i.strip() for i in items) if x], f"{what} {text!r}")
