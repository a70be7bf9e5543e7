"""Named parts that plug in: one registry per kind (judges, critics, guides, strategies, model
providers, environment kinds), filled by each part's own room.

A registry is the single source of its names: the command line's choices and help texts,
the run configuration's validation and the generated configuration page read them from it,
so adding a part touches only the part's own package. Wherever a registered name is
accepted, a dotted path ``package.module:Attr`` is accepted too: it is imported on first use,
checked to be an entry of the kind, and registered under its own name (its ``name``
attribute), so a user adds a judge or a critic of their own without editing the project::

    agent-s3 run ... --judge my_judges:StrictJudge
    agent-s3 critic-bench LABELS.jsonl --critic my_critics.vote:Majority

A built-in part may be registered lazily as a ``"module:Attr"`` string, imported only when
first asked for (model providers whose SDKs are heavy).
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = ["PATH_FORM", "Named", "Registry", "UnknownName", "import_path", "is_path"]

T = TypeVar("T")

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = re.compile(rf"^{_IDENT}(?:\.{_IDENT})*:{_IDENT}(?:\.{_IDENT})*$")
#: How help texts name the dotted-path form.
PATH_FORM = "package.module:Class"


class UnknownName(ValueError):
    """A name that is neither registered nor a dotted path to an entry of the registry's kind;
    the message lists the names there are."""


def is_path(name: str) -> bool:
    """Whether `name` is a dotted path ``package.module:Attr`` rather than a registered name."""
    return bool(_PATH.match(name))


def import_path(path: str) -> Any:
    """The object a dotted path ``package.module:Attr`` names; `UnknownName` saying why not."""
    module_name, _, attr = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise UnknownName(f"{path}: cannot import {module_name} ({e}); is its folder on PYTHONPATH?") from None
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise UnknownName(f"{path}: {module_name} has no {attr}") from None
    return found


@dataclass(frozen=True)
class Named:
    """The mark of a configuration field that names an entry of `registry` (or one of
    `extra`), as in ``judge: Annotated[str, JUDGES.named("none")]``: pydantic validates the
    value against the registry, and the generated configuration page lists the choices."""

    registry: Registry[Any]
    extra: tuple[str, ...] = ()

    def choices(self) -> str:
        return f"{self.registry.choices(self.extra)}, or {PATH_FORM}"

    def check(self, name: str) -> str:
        try:
            return self.registry.validate(name, extra=self.extra)
        except UnknownName as e:
            raise ValueError(str(e)) from None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))


def _identity(entry: Any) -> str:
    """Where an entry is defined (a lazy ``module:Attr`` string names the same place)."""
    if isinstance(entry, str):
        return entry.replace(":", ".")
    return f"{getattr(entry, '__module__', '?')}.{getattr(entry, '__qualname__', type(entry).__qualname__)}"


class Registry(Generic[T]):
    """Names -> entries of one kind.

    `check` says what is wrong with an object offered as an entry (None: nothing), so a
    dotted path to something else is refused in one line; `name_of` reads the name an entry
    gives itself, under which an entry imported by path is registered; `load` imports the
    modules that register the built-in entries, once, before the first lookup; `identity`
    tells whether an entry registered again under a taken name is the same one (by default:
    defined at the same place).
    """

    def __init__(self, kind: str, *, check: Callable[[Any], str | None] | None = None,
                 name_of: Callable[[T], str] | None = None, load: Callable[[], None] | None = None,
                 identity: Callable[[Any], str] = _identity) -> None:
        self.kind = kind
        self._identity = identity
        self._check = check
        self._name_of = name_of
        self._load = load
        self._loaded = load is None
        self._entries: dict[str, T | str] = {}
        self._about: dict[str, str] = {}
        self._lock = threading.RLock()

    # -- filling ---------------------------------------------------------------------------

    def register(self, name: str, entry: T | str, about: str = "") -> T | str:
        """Add `entry` (or a ``"module:Attr"`` string imported on first use) as `name`;
        `about`, a few words for help texts.

        The same entry again (a module imported twice) is accepted; another entry under a
        taken name is a `ValueError` naming the one registered."""
        with self._lock:
            known = self._entries.get(name)
            if known is not None and known is not entry and self._identity(known) != self._identity(entry):
                raise ValueError(f"{self.kind} {name!r} is already registered ({self._identity(known)}): give yours another name")
            self._entries[name] = entry
            if about:
                self._about[name] = about
        return entry

    def unregister(self, name: str) -> None:
        """Remove `name` (a test's own entry, once the test is done)."""
        with self._lock:
            self._entries.pop(name, None)
            self._about.pop(name, None)

    # -- reading ---------------------------------------------------------------------------

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if not self._loaded:
                self._loaded = True
                assert self._load is not None
                self._load()

    def names(self) -> list[str]:
        """The registered names, in the order they were registered."""
        self._ensure_loaded()
        with self._lock:
            return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def get(self, name: str) -> T:
        """The entry registered as `name`, or the one the dotted path `name` names (checked,
        then registered under its own name); `UnknownName` listing the choices otherwise."""
        self._ensure_loaded()
        with self._lock:
            entry = self._entries.get(name)
        if isinstance(entry, str):
            entry = self._resolve(entry, registered=name)
            with self._lock:
                self._entries[name] = entry
            return entry
        if entry is not None:
            return entry
        if not is_path(name):
            raise UnknownName(f"unknown {self.kind} {name!r}: use one of {self.choices()}, "
                              f"or a dotted path {PATH_FORM} of your own")
        found = self._resolve(name)
        if self._name_of is not None:
            self.register(self._name_of(found), found)
        return found

    def _resolve(self, path: str, *, registered: str | None = None) -> T:
        where = f"{self.kind} {registered!r} ({path})" if registered else f"{self.kind} {path}"
        try:
            found = import_path(path)
        except UnknownName as e:
            raise UnknownName(f"{where}: {str(e).removeprefix(path + ': ')}") from None
        problem = self._check(found) if self._check is not None else None
        if problem is not None:
            raise UnknownName(f"{where}: {problem}")
        return found  # type: ignore[no-any-return]

    def validate(self, name: str, *, extra: tuple[str, ...] = ()) -> str:
        """`name` when it is one of `extra`, registered or a dotted path to an entry; else
        `UnknownName` (the run configuration's and the command line's check)."""
        if name in extra or name in self.names():  # a registered name: imported when first used
            return name
        try:
            self.get(name)
        except UnknownName as e:
            if extra and not is_path(name):
                raise UnknownName(f"unknown {self.kind} {name!r}: use one of {self.choices(extra)}, "
                                  f"or a dotted path {PATH_FORM} of your own") from None
            raise e from None
        return name

    # -- words for help texts and schemas ---------------------------------------------------

    def choices(self, extra: tuple[str, ...] = ()) -> str:
        """``a, b or c`` (the registered names, then `extra`)."""
        names = [*self.names(), *extra]
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]

    def help(self, lead: str = "", extra: tuple[str, ...] = ()) -> str:
        """A command-line help text: `lead`, the names there are (with their few words), and
        the dotted-path form."""
        names = [*self.names(), *extra]
        shown = [f"{n} ({self._about[n]})" if n in self._about else n for n in names]
        listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
        return f"{lead}{listed}, or {PATH_FORM} of your own."

    def named(self, *extra: str) -> Named:
        """The mark of a configuration field naming an entry (or one of `extra`, e.g.
        ``none``): ``Annotated[str, REGISTRY.named()]``."""
        return Named(self, extra)
