"""Replies in a JSON schema: one schema per reply contract, made from the pydantic model the
role's parser validates against, and shaped for each provider's structured-output rules.

A role asks with `GenerateConfig(reply_format=ReplyFormat.of(Contract))`; the adapter sends
it the way the model's profile says (`Profile.structured`): OpenAI's strict
`response_format` (also OpenRouter's), Anthropic's `output_config.format` (or a forced tool
where that is all a proxy offers), vLLM's `structured_outputs`, a plain `response_format`
`json_schema` (Gemini, llama.cpp). A model whose profile says "none" gets no schema: the
role's prompt and parser carry the contract as free text.

`strict_schema(model)` is the schema every mechanism starts from: references inlined,
every object closed (`additionalProperties: false`) with every property required (an
optional field is a nullable one), no titles or defaults, `const` as a one-value `enum`.
Each provider then keeps the keywords its strict mode takes and moves the rest into the
description, as its SDK does (`for_provider`). What each service refuses is enforced by the
strict servers (`testing.llm.schema_rules`).

Sources: OpenAI structured outputs guide ("Supported schemas": root an object, every field
required, additionalProperties false, supported keywords, 10 levels and 5000 properties);
Anthropic structured outputs guide and anthropic SDK 2.14 `lib/_parse/_transform.py`
(`transform_schema`, which this module calls for Claude); vLLM `chat_completion/protocol.py`
(`structured_outputs.json`, `response_format` json_schema).
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "OPENAI_FORMATS",
    "OPENAI_KEYWORDS",
    "ReplyFormat",
    "SchemaError",
    "for_provider",
    "strict_schema",
]

#: Keywords of OpenAI's strict subset besides the structural ones.
OPENAI_KEYWORDS = frozenset({
    "pattern", "format",  # strings
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",  # numbers
    "minItems", "maxItems",  # arrays
})
#: String formats OpenAI's strict mode takes.
OPENAI_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_STRUCTURE = frozenset({"type", "properties", "required", "additionalProperties", "items", "anyOf", "enum",
                        "description", "$defs", "$ref"})
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class SchemaError(ValueError):
    """A pydantic model that has no strict JSON schema (a recursive one, say)."""


class ReplyFormat(BaseModel):
    """A reply contract as the model is asked for it: a name and its strict JSON schema."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)
    name: str = Field(pattern=_NAME.pattern)
    """The contract's name (OpenAI's `json_schema.name`, a forced tool's name)."""
    json_schema: dict[str, Any]
    """`strict_schema()` of the contract's pydantic model."""
    description: str | None = None
    """What the reply is, shown to the model with the schema."""

    @classmethod
    def of(cls, model: type[BaseModel], name: str | None = None) -> ReplyFormat:
        """The format of `model`'s replies, named after it unless `name` is given."""
        return _format_of(model, name)


@functools.cache
def _format_of(model: type[BaseModel], name: str | None) -> ReplyFormat:
    doc = (model.__doc__ or "").strip().split("\n\n")[0].strip() or None
    return ReplyFormat(name=name or model.__name__, json_schema=strict_schema(model), description=doc)


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The neutral strict schema of `model` (see the module docstring)."""
    raw = model.model_json_schema(mode="validation")
    defs = raw.pop("$defs", {})
    out = _strict(raw, defs, ())
    if out.get("type") != "object":
        raise SchemaError(f"{model.__name__}: a reply contract must be an object")
    return out


def _strict(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    node = dict(node)
    ref = node.pop("$ref", None)
    if ref is not None:
        name = str(ref).rsplit("/", 1)[-1]
        if name in seen:
            raise SchemaError(f"{name} refers to itself: reply contracts may not be recursive")
        merged = {**defs[name], **{k: v for k, v in node.items() if k == "description"}}
        return _strict(merged, defs, (*seen, name))
    for dropped in ("title", "default", "examples"):
        node.pop(dropped, None)
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "allOf" in node and len(node["allOf"]) == 1:  # pydantic wraps a described reference so
        inner = _strict(node.pop("allOf")[0], defs, seen)
        node = {**inner, **node}
    if "anyOf" in node:
        node["anyOf"] = [_strict(v, defs, seen) for v in node["anyOf"]]
    if "items" in node and isinstance(node["items"], dict):
        node["items"] = _strict(node["items"], defs, seen)
    if node.get("type") == "object" or "properties" in node:
        if "properties" not in node and node.get("additionalProperties", True) is not False:
            # A free-form mapping (dict[str, X]) has no strict form: closing it would leave it
            # always empty, so the contract must name its keys.
            raise SchemaError("a free-form object (a dict) has no strict schema: give the contract named fields")
        props = {k: _strict(v, defs, seen) for k, v in (node.get("properties") or {}).items()}
        node.update(type="object", properties=props, required=list(props), additionalProperties=False)
    return node


def for_provider(schema: dict[str, Any], mechanism: str) -> dict[str, Any]:
    """`schema` as `mechanism` sends it: OpenAI's strict subset (other keywords moved into the
    description), the anthropic SDK's own transform for Claude, the schema as is for the
    servers that take full JSON Schema (vLLM, Gemini, llama.cpp)."""
    if mechanism == "openai_strict":
        return _openai(copy.deepcopy(schema))
    if mechanism in ("anthropic", "anthropic_tool"):
        from anthropic.lib._parse._transform import transform_schema

        return transform_schema(copy.deepcopy(schema))
    return copy.deepcopy(schema)


def _openai(node: dict[str, Any]) -> dict[str, Any]:
    notes = {k: node.pop(k) for k in list(node) if k not in _STRUCTURE and k not in OPENAI_KEYWORDS}
    if node.get("format") is not None and node["format"] not in OPENAI_FORMATS:
        notes["format"] = node.pop("format")
    if notes:
        text = ", ".join(f"{k}: {v}" for k, v in notes.items())
        node["description"] = f"{node['description']}\n\n{{{text}}}" if node.get("description") else f"{{{text}}}"
    if "anyOf" in node:
        node["anyOf"] = [_openai(v) for v in node["anyOf"]]
    if isinstance(node.get("items"), dict):
        node["items"] = _openai(node["items"])
    if isinstance(node.get("properties"), dict):
        node["properties"] = {k: _openai(v) for k, v in node["properties"].items()}
    return node
