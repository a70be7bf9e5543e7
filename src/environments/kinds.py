"""The environment kinds: each registers itself here, and everything else reads the registry.

A kind is where rollouts run (``local`` desktops, an ``osworld`` server, ``aws``, ``android``,
``qemu`` ...). It registers one `EnvironmentKind`: its name, its settings model (the
``environment`` section of a run configuration when ``kind`` names it), a one-phrase
description, the platform its tasks are for, its default settle time and how to open a pool
of its environments. The runner, the command line's ``--env`` choices and help texts, and
the validation of ``environment`` all come from here, so a new kind is one folder under
`environments` whose ``kind.py`` calls `register` (found by `load_kinds`), and no other file.

The settings of all kinds form a tagged union on ``kind``: `settings_from` picks the model
the tag names (a missing tag is the default kind) and validates the rest against it, so a
key of another kind is refused in one line that names the kind's own keys.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from core.clock import ClockSpec
from core.protocols import Platform

if TYPE_CHECKING:
    from environments.pool import EnvironmentPool

__all__ = [
    "DEFAULT_KIND",
    "EnvironmentKind",
    "EnvironmentSettings",
    "KindNames",
    "PoolRequest",
    "default_settings",
    "describe_kinds",
    "field_help",
    "get_kind",
    "kind_names",
    "kinds",
    "load_kinds",
    "register",
    "settings_from",
    "unregister",
]

#: The kind a run uses when its configuration names none.
DEFAULT_KIND = "local"


class EnvironmentSettings(BaseModel):
    """The ``environment`` section of a run: the base every kind's settings model extends."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    kind: str
    """Which kind of environment the rollouts run on (see ``agent-s3 run --help``)."""
    sandbox: bool = True
    """Offer the coding agent a sandbox in the environment (off hides call_code_agent)."""

    def where(self) -> str:
        """Where this run's environments are, for a run's header (no secrets)."""
        return get_kind(self.kind).description

    def check(self) -> None:
        """Raise `core.protocols.EnvError` (one line saying what to pass) when these settings
        cannot open a pool, before anything starts."""

    def checked_sections(self) -> dict[str, BaseModel]:
        """Dict-typed fields of these settings resolved by the model that checks them (their
        defaults filled in), by field name: what ``config show`` prints in their place."""
        return {}

    @classmethod
    def config_variants(cls) -> list[type[BaseModel]]:
        """Every kind's settings model: `core.config` checks ``environment.*`` keys against
        them all (which kind's keys apply is known only once every layer is merged)."""
        return [k.settings for k in kinds()]


S = TypeVar("S", bound=EnvironmentSettings)


@dataclass(frozen=True, slots=True)
class PoolRequest:
    """What a run asks of a kind's pool: how many environments at once, and for whom."""

    size: int = 1
    """Environments the run would use at once; a kind may start fewer (they queue)."""
    hide: tuple[str, ...] = ()
    """Host folders the coding agent's sandbox must not see (the run folder)."""
    run_id: str | None = None
    """The run, for kinds that tag what they start with it (EC2 instances, VMs)."""


#: Opens a pool of a kind's environments from its settings; closing the context closes them.
PoolOpener = Callable[[S, PoolRequest], AbstractAsyncContextManager["EnvironmentPool"]]


@dataclass(frozen=True)
class EnvironmentKind(Generic[S]):
    """One kind of environment, as it registers itself."""

    name: str
    """The ``environment.kind`` value and ``--env`` choice."""
    settings: type[S]
    """Its settings model; its ``kind`` field must be ``Literal[name]`` with that default."""
    description: str
    """A few words for help texts and headers, e.g. "a desktop on this machine"."""
    open_pool: PoolOpener[S]
    """``async with kind.open_pool(settings, PoolRequest(size=4)) as pool``."""
    platforms: tuple[Platform, ...] = ("ubuntu",)
    """The platforms its environments can be: a task for another one is refused before a
    run. The first is what a task file or an instruction given with this kind is read as."""
    settle_seconds: float | None = None
    """Pause after each action when the run sets none (None: the rollout's default)."""
    own_scoring: bool = False
    """Its environments score tasks themselves, without OSWorld's metric code on this
    machine (a simulated fleet): no task is set aside for a metric or package missing here."""
    clock: Callable[[S], ClockSpec | None] | None = None
    """The clock a run on these settings keeps, for a kind whose time is simulated (None,
    or a None answer: the wall clock; see `core.clock`)."""

    def clock_for(self, settings: EnvironmentSettings) -> ClockSpec | None:
        """The simulated clock a run on `settings` is driven by, or None for the wall clock."""
        return self.clock(settings) if self.clock is not None else None  # type: ignore[arg-type]

    @property
    def platform(self) -> Platform:
        """The platform a task file or instruction given with this kind is for."""
        return self.platforms[0]

    def __post_init__(self) -> None:
        if not self.platforms:
            raise TypeError(f"environment kind {self.name!r} names no platform")
        declared = self.settings.model_fields.get("kind")
        if declared is None or declared.default != self.name:
            raise TypeError(f"{self.settings.__name__}.kind must default to {self.name!r} (Literal[{self.name!r}])")


_KINDS: dict[str, EnvironmentKind[Any]] = {}
_LOADED = False
_LOCK = threading.RLock()


def register(kind: EnvironmentKind[Any]) -> EnvironmentKind[Any]:
    """Add `kind` to the registry (a kind module calls this once; tests may add their own).

    Registering the same name again replaces it only with the same settings model (a module
    imported twice); another model under a taken name is a `ValueError`.
    """
    with _LOCK:
        known = _KINDS.get(kind.name)
        if known is not None and known.settings.__qualname__ != kind.settings.__qualname__:
            raise ValueError(f"environment kind {kind.name!r} is already registered by {known.settings.__module__}")
        _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove the kind `name` (a test's own kind, once the test is done)."""
    with _LOCK:
        _KINDS.pop(name, None)


def load_kinds() -> None:
    """Import every ``environments.<folder>.kind`` module once (each registers its kinds)."""
    global _LOADED
    if _LOADED:
        return
    with _LOCK:
        if _LOADED:
            return
        import environments

        for info in sorted(pkgutil.iter_modules(environments.__path__), key=lambda m: m.name):
            if info.ispkg and importlib.util.find_spec(f"environments.{info.name}.kind") is not None:
                importlib.import_module(f"environments.{info.name}.kind")
        _LOADED = True


def kinds() -> list[EnvironmentKind[Any]]:
    """Every registered kind, the default first, then by name."""
    load_kinds()
    with _LOCK:
        found = list(_KINDS.values())
    return sorted(found, key=lambda k: (k.name != DEFAULT_KIND, k.name))


def kind_names() -> list[str]:
    return [k.name for k in kinds()]


def get_kind(name: str) -> EnvironmentKind[Any]:
    """The kind registered as `name`; `KeyError` with the known names otherwise."""
    load_kinds()
    with _LOCK:
        found = _KINDS.get(name)
    if found is None:
        raise KeyError(f"unknown environment kind {name!r}: use one of {', '.join(kind_names())}")
    return found


class KindNames(Sequence[str]):
    """The registered kind names, read afresh at each use (``--env``'s choices: a kind
    registered after the command line was built is still offered)."""

    def __getitem__(self, index: Any) -> Any:
        return kind_names()[index]

    def __len__(self) -> int:
        return len(kind_names())

    def __iter__(self) -> Iterator[str]:
        return iter(kind_names())


def settings_from(value: Any) -> EnvironmentSettings:
    """The settings model the ``kind`` of `value` names, validated (the tagged union).

    Raises pydantic's `ValidationError` located at the offending key (so a run
    configuration reports ``environment.url`` and never echoes a secret's value).
    """
    if isinstance(value, EnvironmentSettings):
        return value
    if not isinstance(value, Mapping):
        raise PydanticCustomError("environment_settings", "must be a mapping of settings with a kind")
    name = value.get("kind", DEFAULT_KIND)
    try:
        kind = get_kind(str(name))
    except KeyError:
        raise _located("kind", name, "unknown environment kind {kind}: use one of {known}",
                       kind=repr(name), known=", ".join(kind_names())) from None
    own = kind.settings.model_fields
    for key in value:
        if key not in own:
            raise _located(str(key), value[key], "no setting of environment kind {kind} (its settings: {own})",
                           kind=kind.name, own=", ".join(sorted(own)))
    return kind.settings.model_validate({**value, "kind": kind.name})


def _located(key: str, given: Any, message: str, **context: str) -> ValidationError:
    error = PydanticCustomError("environment_setting", message, context)
    return ValidationError.from_exception_data(
        "EnvironmentSettings", [InitErrorDetails(type=error, loc=(key,), input=given)]
    )


def default_settings() -> EnvironmentSettings:
    return settings_from({})


def describe_kinds() -> str:
    """``local (a desktop on this machine), osworld (...), ...`` for help texts."""
    return ", ".join(f"{k.name} ({k.description})" for k in kinds())


def field_help(name: str, fallback: str = "") -> str:
    """A command-line option's help for the settings field `name`: which kinds take it and
    what it means, from the settings models' own docstrings (so help cannot drift)."""
    having = [k for k in kinds() if name in k.settings.model_fields]
    if not having:
        return fallback
    doc = (having[0].settings.model_fields[name].description or fallback).split("\n\n")[0]
    first = " ".join(doc.replace("``", "").split())
    return f"With --env {' or '.join(k.name for k in having)}: {first}"

