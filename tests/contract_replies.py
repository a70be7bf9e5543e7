"""Scripted replies in the contract a request asked for: the strict servers answer a
structured request (native structured outputs) only with JSON in its schema, and show the
script what was asked (`ScriptRequest.config.reply_format`); free text elsewhere."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from core.llm.scripted import ScriptRequest
from core.llm.structured import for_provider, strict_schema

__all__ = ["canonical", "reply_in", "structured", "wants_json"]


def wants_json(request: ScriptRequest) -> bool:
    """The request asked for a reply in a JSON schema."""
    return request.config.reply_format is not None


def reply_in(request: ScriptRequest, free: str, fields: dict[str, Any]) -> str:
    """`fields` as the JSON object the request's schema asks for, else the `free` text."""
    return json.dumps(fields) if wants_json(request) else free


def _contracts() -> dict[str, type[BaseModel]]:
    """Every reply contract by the name its format is sent under."""
    from bjudge import parsing as judging
    from gprm import contracts as guide
    from gprm import memory, replies, routing
    from themis import schemas

    found: dict[str, type[BaseModel]] = {}
    for module in (schemas, guide, judging, memory, replies, routing):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__:
                found[value.__name__] = value
    return found


def _by_schema(schema: dict[str, Any]) -> type[BaseModel] | None:
    """The contract whose schema, as some provider sends it, is `schema` (Claude's format has
    no name)."""
    for contract in _contracts().values():
        neutral = strict_schema(contract)
        if any(for_provider(neutral, mechanism) == schema for mechanism in MECHANISMS):
            return contract
    return None


MECHANISMS = ("openai_strict", "json_schema", "anthropic", "vllm")


def canonical(request: ScriptRequest, text: str) -> str:
    """A scripted JSON reply in the scripts' shorthand (the paper's names, fields left to
    their defaults) as the one object a structured request's schema asks for, which is what a
    model held to that schema writes; free text requests get `text` unchanged."""
    if not wants_json(request):
        return text
    fmt = request.config.reply_format
    assert fmt is not None
    contract = _contracts().get(fmt.name) or _by_schema(fmt.json_schema)
    assert contract is not None, f"no contract named {fmt.name!r} or with its schema"
    return contract.model_validate_json(text).model_dump_json()


_TAG = re.compile(r"<(thoughts|answer|facts|key_points|eval)>(.*?)(?:</\1>|$)", re.S)


def _from_free(contract: type[BaseModel], text: str) -> dict[str, Any]:
    """A scripted free-text reply (the prompts' tag formats, a bare list or sentence, the
    scripts' shorthand JSON) as the contract's fields; only for the scripts' own replies,
    never a model's."""
    tags = {name: body.strip() for name, body in _TAG.findall(text)}
    fields = contract.model_fields
    stripped = text.strip()
    if "eval" in tags:
        stripped = tags["eval"]
    if stripped.startswith("{"):
        data = json.loads(stripped)
        if "actions" in fields:  # the router: each call's arguments as the contract names them
            data.setdefault("thought", "")
            data["actions"] = [{"name": a["name"], "arguments": {"target": (a.get("arguments") or {}).get("target"),
                                                                 "answer": (a.get("arguments") or {}).get("answer")}}
                               for a in data.get("actions", [])]
        if contract.__module__.startswith("gprm."):  # the guide's scripts leave text fields out
            for name, info in fields.items():
                if name not in data and info.annotation is str:
                    data[name] = ""
        return data  # type: ignore[no-any-return]
    if stripped.startswith("[") and "history" in fields:
        return {"history": json.loads(stripped)}
    out: dict[str, Any] = {}
    if "thoughts" in fields:
        out["thoughts"] = tags.get("thoughts", "")
    if "answer" in fields:
        out["answer"] = int(tags["answer"])
    for name in ("facts", "key_points"):
        if name in fields:
            out[name] = [line.lstrip("-* ").strip() for line in tags.get(name, "").splitlines() if line.strip()]
    if "summary" in fields:
        out["summary"] = stripped
    return out


def structured(reply: Callable[[ScriptRequest], Any]) -> Callable[[ScriptRequest], Any]:
    """`reply` answering a structured request with the JSON its schema asks for, made from the
    free text or shorthand JSON it scripts; free-text requests (and replies that are not text:
    a `Reply`, None) get what it returns unchanged."""

    def answer(request: ScriptRequest) -> Any:
        text = reply(request)
        if not isinstance(text, str) or not wants_json(request):
            return text
        fmt = request.config.reply_format
        assert fmt is not None
        contract = _contracts().get(fmt.name) or _by_schema(fmt.json_schema)
        assert contract is not None, f"no contract named {fmt.name!r} or with its schema"
        return contract.model_validate(_from_free(contract, text)).model_dump_json()

    return answer
