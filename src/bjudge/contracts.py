"""The JSON contracts of the judges' and the narrator's answers, for models whose provider
enforces a schema (native structured outputs, `core.llm.structured`).

In free text the judges answer in tags (``<thoughts>``, ``<answer>``, ``<facts>``,
``<key_points>``) and `bjudge.parsing` reads them. With structured outputs the same answer
is one JSON object in one of these contracts, read here by validating it: a value out of
range is a problem the model is told, as in free text; nothing is looked for elsewhere.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .parsing import tag_section

__all__ = ["FactsContract", "KeyPointsContract", "Read", "choice_contract", "read_choice", "read_list",
           "thoughts_of"]

T = TypeVar("T")
#: A reader of a reply: ``(value, None)`` or ``(None, problem)``.
Read = Callable[[str], tuple[T | None, str | None]]


class _Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


@functools.cache
def choice_contract(low: int, high: int) -> type[BaseModel]:
    """``{"thoughts", "answer"}`` with the answer an integer from `low` to `high` (the MCQ and
    pairwise judges' candidate number, the independent and WebJudge scores)."""
    return create_model(
        f"Choice{low}to{high}",
        __base__=_Contract,
        __doc__=f"The judge's reasoning, then one integer from {low} to {high}.",
        thoughts=(str, Field(description="The comparison of the candidates, step by step.")),
        answer=(int, Field(ge=low, le=high, description=f"One integer from {low} to {high}.")),
    )


class FactsContract(_Contract):
    """What one action changed, as short checkable facts."""

    thoughts: str
    """What the screens show before and after the action."""
    facts: list[str]
    """One change per entry; empty when the action changed nothing visible."""


class KeyPointsContract(_Contract):
    """The task's requirements, one per entry."""

    thoughts: str
    key_points: list[str]


def _validated(contract: type[BaseModel], text: str) -> tuple[BaseModel | None, str | None]:
    try:
        return contract.model_validate_json(text), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the reply"
        return None, f"{where}: {first['msg']}"


def read_choice(text: str, low: int, high: int) -> tuple[int | None, str | None]:
    """The answer of a structured choice reply."""
    found, problem = _validated(choice_contract(low, high), text)
    return (int(found.answer), None) if found is not None else (None, problem)  # type: ignore[attr-defined]


def read_list(contract: type[BaseModel], field: str, *, limit: int, empty_ok: bool) -> Read[list[str]]:
    """A reader of a structured list reply (`field` of `contract`), stripped and cut at
    `limit`; an empty list is a problem unless `empty_ok`."""

    def read(text: str) -> tuple[list[str] | None, str | None]:
        found, problem = _validated(contract, text)
        if found is None:
            return None, problem
        items = [str(v).strip() for v in getattr(found, field) if str(v).strip()][:limit]
        return (items, None) if items or empty_ok else (None, f'"{field}" is empty')

    return read


def thoughts_of(reply: str) -> str:
    """The reasoning of a judge's or narrator's reply: the ``thoughts`` field of a structured
    one, else its ``<thoughts>`` section (empty when it has none)."""
    try:
        value: Any = json.loads(reply)
    except ValueError:
        return tag_section(reply, "thoughts") or ""
    found = value.get("thoughts") if isinstance(value, dict) else None
    return found if isinstance(found, str) else ""
