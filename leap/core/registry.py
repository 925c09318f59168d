"""A small generic registry, the seam through which agents, metrics and draft policies plug in.

Modelled on ``catalogue`` / ``timm``: ``@registry.register("name")`` adds a class or factory,
``registry.get(name)`` returns it and lists the known names on a miss, duplicates are refused unless
``overwrite=True``, and third-party packages add entries through an entry-point group that is read
lazily the first time a name is looked up (local registrations win over entry points).

Who calls what: each plug-in module registers at import; the CLI and the benchmark resolve names
given on the command line with :meth:`Registry.get` / :meth:`Registry.create`; contract tests iterate
:meth:`Registry.names` so that every plug-in is tested without a code edit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
import importlib
from importlib import metadata
from typing import Any, Generic, TypeVar

from leap.core.errors import LeapError, SettingsError, UnknownNameError

__all__ = ["Registry", "check_arguments"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Named factories of one kind.

    Args:
        kind: what the entries are, for messages ("draft policy", "search agent", ...).
        entry_point_group: the ``importlib.metadata`` entry-point group read for third-party entries.
        builtin_modules: modules that register the built-in entries, imported on the first lookup
            (so importing the registry alone stays cheap).
    """

    def __init__(
        self, kind: str, entry_point_group: str | None = None, builtin_modules: tuple[str, ...] = ()
    ) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self.builtin_modules = builtin_modules
        self._entries: dict[str, T] = {}
        self._entry_points_loaded = False

    def register(self, name: str, *, overwrite: bool = False) -> Callable[[T], T]:
        """Decorator that registers ``obj`` under ``name``; refuses a duplicate unless ``overwrite``."""

        def decorator(obj: T) -> T:
            self.add(name, obj, overwrite=overwrite)
            return obj

        return decorator

    def add(self, name: str, obj: T, *, overwrite: bool = False) -> None:
        """Register ``obj`` under ``name`` (the non-decorator form of :meth:`register`)."""
        if not name or name != name.strip():
            raise ValueError(f"{self.kind} names must be non-empty without surrounding spaces: {name!r}")
        if name in self._entries and not overwrite:
            raise ValueError(
                f"a {self.kind} named {name!r} is already registered; pass overwrite=True to replace it"
            )
        self._entries[name] = obj

    def remove(self, name: str) -> None:
        """Unregister ``name`` (tests use this to leave the registry as they found it)."""
        self._entries.pop(name, None)

    def get(self, name: str) -> T:
        """The entry registered as ``name``; a miss raises :class:`UnknownNameError` listing the names."""
        if name not in self._entries:
            self._load_entry_points()
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(self.names()) or "(none)"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; registered: {known}") from None

    def create(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call the factory registered as ``name`` with the given arguments, checked first against its
        signature (:func:`check_arguments`: an unknown setting, or text where a number or flag is declared, is a
        one-line :class:`SettingsError` naming the entry); the factory's own TypeError/ValueError (not leap's errors,
        which say what to do already) is re-raised as a :class:`SettingsError` with the entry's name."""
        factory = self.get(name)
        what = f"{self.kind} {name!r}"
        check_arguments(factory, kwargs, what)
        try:
            return factory(*args, **kwargs)  # type: ignore[operator]
        except LeapError:
            raise  # leap's own errors already say what to do
        except (TypeError, ValueError) as err:
            raise SettingsError(f"{what}: {err}") from err

    def names(self) -> list[str]:
        """Sorted names of every entry, entry points included."""
        self._load_entry_points()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._load_entry_points()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for module in self.builtin_modules:
            importlib.import_module(module)
        if self.entry_point_group is None:
            return
        for ep in metadata.entry_points(group=self.entry_point_group):
            if ep.name not in self._entries:  # local registrations win
                self._entries[ep.name] = ep.load()


_DECLARED = (bool, int, float)


def check_arguments(factory: Any, kwargs: dict[str, Any], what: str) -> None:
    """Settings checked against ``factory``'s signature before anything is built: names it does not take (unless
    it takes ``**kwargs``), and text given where the default declares a number or a flag (``num_tokens=six``).
    Raises :class:`SettingsError` in one line naming ``what``, the setting and what it takes."""
    import inspect

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = [n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and n != "self"]
    for key, value in kwargs.items():
        param = params.get(key)
        if param is None:
            if not takes_any:
                raise SettingsError(f"{what} has no setting {key!r}; it takes: {', '.join(named) or 'none'}")
            continue
        default = param.default
        if type(default) in _DECLARED and isinstance(value, str):
            kind = {bool: "true or false", int: "an integer", float: "a number"}[type(default)]
            raise SettingsError(f"{what}: {key} must be {kind} (default {default!r}), got {value!r}")
