"""The parts of OSWorld's task JSON that `Task` types: set-up steps and the evaluator.

Field names follow OSWorld's `evaluation_examples/` files exactly so that a task written for
OSWorld loads unchanged. Unknown fields are kept (``extra="allow"``), not rejected: the
upstream files carry occasional extras (``hint``, ``env_may_change``, ``_config_note``).
Each part is written back as it was read (`_AsWritten`): a default the file did not spell
out is not added, so an exported task is the imported one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from core.shell_flag import osworld_shell

__all__ = ["Evaluator", "GetterSpec", "MetricCall", "SetupStep"]


class _AsWritten(BaseModel):
    """A part of a task file: unknown keys kept, and dumped with only the keys it was given."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        given = self.model_fields_set | set(self.model_extra or {})
        return {key: value for key, value in data.items() if key in given}


class SetupStep(_AsWritten):
    """One `{type, parameters}` entry of `config` or `evaluator.postconfig`."""

    type: str
    parameters: dict[str, Any] = Field(default_factory=dict)

    @field_validator("parameters", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator("parameters")
    @classmethod
    def _shell_spelled_as_osworld_does(cls, value: dict[str, Any]) -> dict[str, Any]:
        osworld_shell(value.get("shell"))  # kept as written: OSWorld's controller sends it on
        return value


class GetterSpec(_AsWritten):
    """A `result` or `expected` entry: a getter `type` plus that getter's own fields."""

    type: str

    @property
    def params(self) -> dict[str, Any]:
        """The getter's fields other than `type` (e.g. `path`, `dest`, `command`, `rules`)."""
        return dict(self.model_extra or {})

    @model_validator(mode="after")
    def _shell_spelled_as_osworld_does(self) -> GetterSpec:
        osworld_shell(self.params.get("shell"))  # a command getter posts it to /execute as is
        return self


@dataclass(frozen=True, slots=True)
class MetricCall:
    """One metric of an evaluator with its own getters and options, lists already split."""

    func: str
    result: GetterSpec | None
    expected: GetterSpec | None
    options: dict[str, Any]


class Evaluator(_AsWritten):
    """How a finished task is scored: getters fetch states, metrics compare them."""

    func: str | list[str]
    result: GetterSpec | list[GetterSpec | None] | None = None
    expected: GetterSpec | list[GetterSpec | None] | None = None
    options: dict[str, Any] | list[dict[str, Any] | None] | None = None
    conj: Literal["and", "or"] = "and"
    postconfig: list[SetupStep] = Field(default_factory=list)

    @model_validator(mode="after")
    def _parallel_lists(self) -> Evaluator:
        if isinstance(self.func, list):
            if not self.func:
                raise ValueError("func: an empty list names no metric")
            for name in ("result", "expected", "options"):
                value = getattr(self, name)
                if isinstance(value, list) and len(value) != len(self.func):
                    raise ValueError(f"{name}: has {len(value)} entries for {len(self.func)} funcs")
            if self.result is not None and not isinstance(self.result, list):
                raise ValueError("result: must be a list when func is a list")
        else:
            for name in ("result", "expected"):
                if isinstance(getattr(self, name), list):
                    raise ValueError(f"{name}: is a list but func is a single metric")
        return self

    @property
    def funcs(self) -> list[str]:
        return self.func if isinstance(self.func, list) else [self.func]

    def calls(self) -> list[MetricCall]:
        """The metrics with their getters and options, one entry per func."""
        if isinstance(self.func, str):
            options = self.options if isinstance(self.options, dict) else {}
            result = self.result if isinstance(self.result, GetterSpec) else None
            expected = self.expected if isinstance(self.expected, GetterSpec) else None
            return [MetricCall(self.func, result, expected, dict(options))]
        calls = []
        for i, func in enumerate(self.func):
            calls.append(
                MetricCall(
                    func,
                    _nth(self.result, i),
                    _nth(self.expected, i),
                    dict(_nth_options(self.options, i)),
                )
            )
        return calls


def _nth(value: GetterSpec | list[GetterSpec | None] | None, i: int) -> GetterSpec | None:
    if isinstance(value, list):
        return value[i]
    return value


def _nth_options(value: dict[str, Any] | list[dict[str, Any] | None] | None, i: int) -> dict[str, Any]:
    if isinstance(value, list):
        return value[i] or {}
    return value or {}
