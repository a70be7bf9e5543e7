"""What each service's structured outputs refuse in a schema, and the check that a reply
conforms to the schema it was asked in.

The strict servers refuse a schema the real service refuses, with its status and error
shape, and answer a structured request only with a reply that validates against the schema
(a script whose reply does not is a broken test, said loudly). Rules and sources:

- OpenAI strict mode (`response_format` json_schema with `strict: true`; OpenAI structured
  outputs guide, "Supported schemas"): the name matches `^[a-zA-Z0-9_-]{1,64}$`; the root is
  an object, not `anyOf`; every object sets `additionalProperties: false` and lists every
  property in `required`; only the keywords of `core.llm.structured.OPENAI_KEYWORDS` besides
  the structural ones (`allOf`, `not`, `if`/`then`/`else`, `patternProperties`,
  `minLength`, `maxLength`, `default`, ... are "not permitted"); string formats of
  `OPENAI_FORMATS`; at most 10 levels of nesting, 5000 properties, 1000 enum values, and
  120000 characters of property names, enum and const values.
- Anthropic (`output_config.format`, or a `strict` tool's `input_schema`; structured outputs
  guide, "JSON Schema limitations"; anthropic SDK `transform_schema`): objects set
  `additionalProperties: false`; no numerical constraints, no `minLength`/`maxLength`, no
  `maxItems` and `minItems` only 0 or 1, no `oneOf`/`not`/`if`/`patternProperties`, string
  formats of the SDK's list, enum values primitive; at most 24 optional properties and 16
  properties with union types; JSON outputs refuse an assistant prefill and citations.
- vLLM (`structured_outputs` {json | regex | choice}, `response_format` json_schema): the
  schema must be valid JSON Schema, and only one kind of constraint per request
  (`chat_completion/protocol.py`, `check_structured_outputs_count`). Gemini's OpenAI
  endpoint and llama.cpp take `response_format` json_schema with any valid schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator, SchemaError
from jsonschema.exceptions import ValidationError

from core.llm.structured import OPENAI_FORMATS, OPENAI_KEYWORDS

from .wire import WireError

__all__ = [
    "ANTHROPIC_FORMATS",
    "ANTHROPIC_MAX_OPTIONAL",
    "ANTHROPIC_MAX_UNIONS",
    "OPENAI_LIMITS",
    "check_anthropic_schema",
    "check_openai_schema",
    "check_valid_schema",
    "nonconformity",
]

OPENAI_LIMITS = {"depth": 10, "properties": 5000, "enum_values": 1000, "characters": 120_000}
_OPENAI_STRUCTURE = {"type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "const",
                     "description", "title", "$defs", "$ref", "definitions"}
ANTHROPIC_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6",
                               "uuid"})
ANTHROPIC_MAX_OPTIONAL = 24
ANTHROPIC_MAX_UNIONS = 16
_ANTHROPIC_REFUSED = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
                      "maxLength", "maxItems", "minProperties", "maxProperties", "patternProperties", "oneOf",
                      "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "unevaluatedProperties")


def _walk(node: Any, path: tuple[str, ...] = (), depth: int = 1) -> Iterator[tuple[dict[str, Any], tuple[str, ...], int]]:
    """Every sub-schema with its path and object nesting depth."""
    if not isinstance(node, dict):
        return
    yield node, path, depth
    inner = depth + (1 if node.get("type") == "object" else 0)
    for key, value in (node.get("properties") or {}).items():
        yield from _walk(value, (*path, "properties", key), inner)
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], (*path, "items"), depth)
    for word in ("anyOf", "oneOf", "allOf"):
        for i, value in enumerate(node.get(word) or []):
            yield from _walk(value, (*path, word, str(i)), depth)
    for name, value in (node.get("$defs") or {}).items():
        yield from _walk(value, (*path, "$defs", name), depth)


def check_valid_schema(schema: Any, param: str) -> None:
    """A 400 unless `schema` is a valid JSON Schema object."""
    if not isinstance(schema, dict):
        raise WireError(400, f"{param}: the schema must be a JSON object", param=param, code="invalid_json_schema")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise WireError(400, f"{param}: invalid JSON schema: {exc.message}", param=param,
                        code="invalid_json_schema") from None


def check_openai_schema(response_format: Any) -> dict[str, Any]:
    """The schema of an OpenAI strict `response_format`, or the 400 the API answers."""
    spec = response_format.get("json_schema") if isinstance(response_format, dict) else None
    if not isinstance(spec, dict):
        raise WireError(400, "Missing required parameter: 'response_format.json_schema'.",
                        param="response_format.json_schema", code="missing_required_parameter")
    name = spec.get("name")
    if not isinstance(name, str) or not name or len(name) > 64 or not all(c.isalnum() or c in "_-" for c in name):
        raise WireError(400, f"Invalid 'response_format.json_schema.name': string does not match pattern "
                        f"'^[a-zA-Z0-9_-]+$' or is longer than 64 ({name!r}).", param="response_format.json_schema.name",
                        code="invalid_value")
    found = spec.get("schema")
    check_valid_schema(found, "response_format")
    assert isinstance(found, dict)
    schema: dict[str, Any] = found
    if spec.get("strict") is not True:
        return schema

    def bad(path: tuple[str, ...], why: str) -> WireError:
        return WireError(400, f"Invalid schema for response_format '{name}': In context={path!r}, {why}",
                         param="response_format", code="invalid_json_schema")

    if schema.get("type") != "object" or "anyOf" in schema:
        raise bad((), "schema must be a JSON Schema of 'type: \"object\"', got a different root.")
    properties = enum_values = characters = 0
    for node, path, depth in _walk(schema):
        if depth > OPENAI_LIMITS["depth"]:
            raise bad(path, f"the schema nests more than {OPENAI_LIMITS['depth']} levels of objects.")
        for word in node:
            if word not in _OPENAI_STRUCTURE and word not in OPENAI_KEYWORDS:
                raise bad(path, f"'{word}' is not permitted.")
        if "format" in node and node["format"] not in OPENAI_FORMATS:
            raise bad(path, f"format '{node['format']}' is not supported.")
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                raise bad(path, "'additionalProperties' is required to be supplied and to be false.")
            keys = list(node.get("properties") or {})
            missing = [k for k in keys if k not in (node.get("required") or [])]
            if missing:
                raise bad(path, "'required' is required to be supplied and to be an array including every key "
                                f"in properties. Missing '{missing[0]}'.")
            properties += len(keys)
            characters += sum(len(k) for k in keys)
        values = node.get("enum") or []
        enum_values += len(values)
        characters += sum(len(str(v)) for v in values)
    for limit, value in (("properties", properties), ("enum_values", enum_values), ("characters", characters)):
        if value > OPENAI_LIMITS[limit]:
            raise bad((), f"the schema has {value} {limit.replace('_', ' ')}, above the limit of {OPENAI_LIMITS[limit]}.")
    return schema


def check_anthropic_schema(schema: Any, param: str) -> dict[str, Any]:
    """The schema of Claude's `output_config.format` (or a strict tool), or the 400."""
    check_valid_schema(schema, param)

    def bad(why: str) -> WireError:
        return WireError(400, f"{param}: {why}", param=param)

    if schema.get("type") != "object":
        raise bad("the schema's root must be an object")
    optional = unions = 0
    for node, path, _ in _walk(schema):
        where = ".".join(path) or "root"
        for word in _ANTHROPIC_REFUSED:
            if word in node:
                raise bad(f"'{word}' is not supported in structured outputs (at {where})")
        if node.get("minItems") not in (None, 0, 1):
            raise bad(f"minItems must be 0 or 1 (at {where})")
        if "format" in node and node["format"] not in ANTHROPIC_FORMATS:
            raise bad(f"string format '{node['format']}' is not supported (at {where})")
        if any(isinstance(v, dict | list) for v in node.get("enum") or []):
            raise bad(f"enum values must be strings, numbers, booleans or null (at {where})")
        if str(node.get("$ref", "#")).split("/")[0] != "#":
            raise bad(f"external $ref is not supported (at {where})")
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                raise bad(f"additionalProperties must be set to false for objects (at {where})")
            required = set(node.get("required") or [])
            optional += sum(1 for k in node.get("properties") or {} if k not in required)
        if "anyOf" in node or isinstance(node.get("type"), list):
            unions += 1
    if optional > ANTHROPIC_MAX_OPTIONAL:
        raise bad(f"Schema is too complex for compilation: {optional} optional parameters (at most "
                  f"{ANTHROPIC_MAX_OPTIONAL})")
    if unions > ANTHROPIC_MAX_UNIONS:
        raise bad(f"Schema is too complex for compilation: {unions} parameters with union types (at most "
                  f"{ANTHROPIC_MAX_UNIONS})")
    return schema


def nonconformity(schema: dict[str, Any], text: str) -> str | None:
    """Why `text` is not a JSON value valid against `schema` (None: it is)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg})"
    try:
        Draft202012Validator(schema).validate(value)
    except ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "root"
        return f"{where}: {exc.message}"
    return None
