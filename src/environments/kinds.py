"""The environment kinds: each registers itself here, and everything else reads the registry.

A kind is where rollouts run (``local`` desktops, an ``osworld`` server, ``aws``, ``android``,
``qemu`` ...). It registers one `EnvironmentKind`: its name, its settings model (the
``environment`` section of a run configuration when ``kind`` names it), a one-phrase
description, the platform its tasks are for, its default settle time and how to open a pool
of its environments. The runner, the command line's ``--env`` choices and help texts, and
the validation of ``environment`` all come from here (`KINDS`, a `core.registry.Registry`),
so a new kind is one folder under `environments` whose ``kind.py`` calls `register` (found
by `load_kinds`), and no other file; a kind of your own, outside the project, is named by a
dotted path ``package.module:KIND`` (an `EnvironmentKind`) wherever a kind's name is taken
(``--env``, ``environment.kind``).

The settings of all kinds form a tagged union on ``kind``: `settings_from` picks the model
the tag names (a missing tag is the default kind) and validates the rest against it, so a
key of another kind is refused in one line that names the kind's own keys.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from core.clock import ClockSpec
from core.protocols import Platform
from core.registry import Registry, UnknownName, is_path

if TYPE_CHECKING:
    from environments.pool import EnvironmentPool

__all__ = [
    "DEFAULT_KIND",
    "KINDS",
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
    def config_variants(cls, layer: Mapping[str, Any] | None = None) -> list[type[BaseModel]]:
        """Every kind's settings model: `core.config` checks ``environment.*`` keys against
        them all (which kind's keys apply is known only once every layer is merged). A
        `layer` naming a kind by dotted path registers it first, so its keys are known."""
        named = layer.get("kind") if layer is not None else None
        if isinstance(named, str) and is_path(named):
            try:
                get_kind(named)
            except KeyError:
                pass  # said in one line when the section is validated (`settings_from`)
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


def _discover() -> None:
    """Import every ``environments.<folder>.kind`` module (each registers its kinds)."""
    import environments

    for info in sorted(pkgutil.iter_modules(environments.__path__), key=lambda m: m.name):
        if info.ispkg and importlib.util.find_spec(f"environments.{info.name}.kind") is not None:
            importlib.import_module(f"environments.{info.name}.kind")


def _problem(found: Any) -> str | None:
    if not isinstance(found, EnvironmentKind):
        return "not an environment kind: an environments.kinds.EnvironmentKind (name, settings, open_pool ...)"
    return None


def _same_settings(entry: Any) -> str:
    """A kind is the same one again when its settings model is (a module imported twice)."""
    return entry.replace(":", ".") if isinstance(entry, str) else str(entry.settings.__qualname__)


#: Kind name -> its `EnvironmentKind`; the built-in kinds are found by `load_kinds`, and a
#: dotted path ``package.module:KIND`` names a kind of your own wherever a name is taken.
KINDS: Registry[EnvironmentKind[Any]] = Registry("environment kind", check=_problem, name_of=lambda k: k.name,
                                                  load=_discover, identity=_same_settings)


def register(kind: EnvironmentKind[Any]) -> EnvironmentKind[Any]:
    """Add `kind` to the registry (a kind module calls this once; tests may add their own).

    Registering the same name again replaces it only with the same settings model (a module
    imported twice); another model under a taken name is a `ValueError`.
    """
    KINDS.register(kind.name, kind, kind.description)
    return kind


def unregister(name: str) -> None:
    """Remove the kind `name` (a test's own kind, once the test is done)."""
    KINDS.unregister(name)


def load_kinds() -> None:
    """Import every ``environments.<folder>.kind`` module once (each registers its kinds)."""
    KINDS.names()


def kinds() -> list[EnvironmentKind[Any]]:
    """Every registered kind, the default first, then by name."""
    found = [KINDS.get(name) for name in KINDS.names()]
    return sorted(found, key=lambda k: (k.name != DEFAULT_KIND, k.name))


def kind_names() -> list[str]:
    return [k.name for k in kinds()]


def get_kind(name: str) -> EnvironmentKind[Any]:
    """The kind registered as `name`, or the one the dotted path `name` names (registered
    under its own name); `KeyError` with the known names otherwise."""
    try:
        return KINDS.get(name)
    except UnknownName as e:
        raise KeyError(str(e)) from None


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
        kind = KINDS.get(str(name))
    except UnknownName as e:
        raise _located("kind", name, "{why}", why=str(e)) from None
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

