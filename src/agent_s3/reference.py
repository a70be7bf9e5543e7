"""The prompt's action reference, generated from the grammar so the two cannot drift.

Each action becomes a Python-style method signature with its class docstring and one line
per argument taken from the field descriptions.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Collection
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

from agent_s3.actions import ACTION_TYPES, ActionBase, action_fields, action_name

__all__ = ["action_reference", "describe_action"]


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in get_args(annotation))
    if origin is list:
        (inner,) = get_args(annotation) or (Any,)
        return f"list[{_type_name(inner)}]"
    if origin is dict:
        key, value = get_args(annotation) or (Any, Any)
        return f"dict[{_type_name(key)}, {_type_name(value)}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def describe_action(cls: type[ActionBase]) -> str:
    """One action as a signature, its docstring and its arguments."""
    params: list[str] = []
    lines: list[str] = []
    for name in action_fields(cls):
        field = cls.model_fields[name]
        text = f"{name}: {_type_name(field.annotation)}"
        if not field.is_required():
            text += f" = {field.get_default(call_default_factory=True)!r}"
        params.append(text)
        if field.description:
            lines.append(f"        {name}: {field.description}")
    doc = inspect.cleandoc(cls.__doc__ or "")
    head = f"    def {action_name(cls)}({', '.join(params)}):"
    if not lines:
        return f'{head}\n        """{doc}"""'
    return "\n".join([head, f'        """{doc}', "", *lines, '        """'])


def action_reference(allowed: Collection[str] | None = None) -> str:
    """The `class Agent` block listing every allowed action, in grammar order."""
    chosen = tuple(c for c in ACTION_TYPES if allowed is None or action_name(c) in allowed)
    texts = tuple((c.__doc__, tuple(f.description for f in c.model_fields.values())) for c in chosen)
    return _reference(chosen, texts)


@cache
def _reference(chosen: tuple[type[ActionBase], ...], texts: tuple[object, ...]) -> str:
    """Built once per set of actions and their texts (every step's system prompt holds it,
    and describing an action asks pydantic for its defaults, which is slow)."""
    return "class Agent:\n" + "\n\n".join(describe_action(c) for c in chosen)
