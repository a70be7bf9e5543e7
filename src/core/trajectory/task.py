"""A task: what the agent is asked to do, where, and how the result is checked.

`Task` is the one task record of the project: a task file is validated into it once, at
load (`Task.from_osworld`), and every room after that (the runner, the environments' set-up
and scoring, the judges, the run folder) reads its typed fields. Its set-up steps and
evaluator are OSWorld's, typed (`core.trajectory.osworld`).

On disk (a run folder's ``task.json``) the record keeps the shape it had before its OSWorld
parts were typed: ``config`` and ``evaluator`` as OSWorld writes them (``{}`` for no
evaluator), and the OSWorld keys without a column of their own under ``extra``, so that
run folders written before and after read alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from core.platforms import Platform

from .base import Record
from .osworld import Evaluator, MetricCall, SetupStep

__all__ = ["OSWORLD_KEYS", "Platform", "Task"]

#: OSWorld task keys typed here but written under ``extra`` in a run folder's task.json
#: (where they lived before they were typed), and only when the task file gave them.
_TYPED_EXTRAS = ("source", "trajectory", "proxy", "fixed_ip", "possibility_of_env_change")
#: OSWorld keys written back only when the task file gave them.
_GIVEN_ONLY = ("snapshot", "related_apps", "config")
#: Every OSWorld task key with a field of its own here; the rest go to `extra`.
OSWORLD_KEYS = frozenset({"id", "instruction", "evaluator", *_GIVEN_ONLY, *_TYPED_EXTRAS})


_TASK_FILE: dict[str, bool] = {"task_file": True}  # the validation context of `from_osworld`
_ABSENT = object()  # a task file without "evaluator"


class Task(Record):
    """One benchmark task in OSWorld's JSON shape, plus where it came from."""

    schema_version: int = 1
    id: str
    instruction: str
    """What the user asks for, given to the agent verbatim."""
    platform: Platform = "ubuntu"
    """Operating system of the environment; selects prompts, key names and providers."""
    snapshot: str = ""
    """Name of the start state the environment reverts to (OSWorld's ``snapshot``)."""
    related_apps: list[str] = Field(default_factory=list)
    """Applications the task touches (OSWorld's ``related_apps``)."""
    config: list[SetupStep] = Field(default_factory=list)
    """Set-up steps run before the agent starts (OSWorld's ``config``)."""
    evaluator: Evaluator | None = None
    """How the final state is scored (OSWorld's ``evaluator``); None for a task without one
    (a free-text instruction). Written as ``{}`` then."""
    source: str | list[str] = ""
    """Where the task was taken from (OSWorld's ``source``)."""
    trajectory: str = ""
    """OSWorld's ``trajectory`` label."""
    proxy: bool = False
    """Whether the task runs behind OSWorld's proxy (OSWorld's ``proxy``)."""
    fixed_ip: bool = False
    """OSWorld's ``fixed_ip``."""
    possibility_of_env_change: str = "low"
    """OSWorld's ``possibility_of_env_change``."""
    complexity: str | None = None
    """Difficulty label from the source, when it has one."""
    max_steps: int | None = Field(default=None, ge=1)
    """Step budget for this task; None means the run's default."""
    source_path: str | None = None
    """File the task was loaded from, for error messages and re-export; relative local files
    of its set-up steps resolve against its folder."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """OSWorld keys without a field here (``complexity``, ``hint`` ...), kept so that an
    exported task is the imported one."""

    _domain: str = PrivateAttr(default="")

    @classmethod
    def from_osworld(
        cls,
        data: dict[str, Any],
        *,
        platform: Platform = "ubuntu",
        source_path: str | None = None,
        domain: str = "",
    ) -> Task:
        """Validate one OSWorld task JSON object (pydantic's ValidationError names each bad
        field's path; `environments.tasks.loader` turns it into one line naming the file)."""
        fields = {key: value for key, value in data.items() if key in OSWORLD_KEYS}
        rest = {key: value for key, value in data.items() if key not in OSWORLD_KEYS}
        record = {"evaluator": _ABSENT, **fields, "platform": platform, "source_path": source_path, "extra": rest}
        task = cls.model_validate(record, context=_TASK_FILE)
        task._domain = domain
        return task

    def to_osworld(self) -> dict[str, Any]:
        """The OSWorld task JSON object this task came from (or would come from)."""
        given = self.model_fields_set
        out: dict[str, Any] = {"id": self.id, "instruction": self.instruction}
        for key in (*_GIVEN_ONLY, *_TYPED_EXTRAS):
            if key in given:
                out[key] = _plain(getattr(self, key))
        out["evaluator"] = self.evaluator.model_dump(mode="json") if self.evaluator is not None else {}
        return {**out, **self.extra}

    @property
    def domain(self) -> str:
        """The task list's domain (e.g. ``libreoffice_calc``) it was loaded under, or its
        snapshot label; not part of the record (a run keeps domains in its manifest)."""
        return self._domain or self.snapshot

    @property
    def base_dir(self) -> Path | None:
        """The folder of the task file, against which relative local files resolve."""
        return Path(self.source_path).parent if self.source_path else None

    def all_steps(self) -> list[SetupStep]:
        """Set-up steps followed by the evaluator's postconfig steps."""
        return [*self.config, *(self.evaluator.postconfig if self.evaluator is not None else [])]

    def metric_calls(self) -> list[MetricCall]:
        """The evaluator's metrics with their getters and options; none without an evaluator."""
        return self.evaluator.calls() if self.evaluator is not None else []

    @field_validator("evaluator", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any, info: ValidationInfo) -> Any:
        if info.context is _TASK_FILE:  # a task file must say how it is scored
            if value is _ABSENT:
                raise PydanticCustomError("missing", "Field required")
            return value
        return None if value == {} else value  # how a run folder writes "no evaluator"

    @model_validator(mode="before")
    @classmethod
    def _typed_extras_from_extra(cls, data: Any) -> Any:
        """A task.json keeps the typed OSWorld keys under ``extra``: lift them to their fields."""
        if isinstance(data, dict) and isinstance(data.get("extra"), dict):
            extra = dict(data["extra"])
            lifted = {key: extra.pop(key) for key in _TYPED_EXTRAS if key in extra and key not in data}
            if lifted:
                data = {**data, **lifted, "extra": extra}
        return data

    @model_serializer(mode="wrap")
    def _as_stored(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        given = self.model_fields_set
        typed = {key: data.pop(key) for key in _TYPED_EXTRAS if key in data}
        for key in _GIVEN_ONLY:
            if key not in given:
                data.pop(key, None)
        if "evaluator" in data and data["evaluator"] is None:
            data["evaluator"] = {}
        if "extra" in data:
            data["extra"] = {**{key: value for key, value in typed.items() if key in given}, **data["extra"]}
        return data


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, SetupStep):
        return value.model_dump(mode="json")
    return value
