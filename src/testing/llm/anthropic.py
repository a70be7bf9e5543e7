"""A local Anthropic Messages server: `POST /v1/messages`.

It reads the real request shape (`system` as text or blocks, content blocks with base64
`image` sources and `cache_control`, required `max_tokens`, `thinking`) and answers with the
real response shape (`msg_` ids, content blocks, stop reasons, usage with
`cache_read_input_tokens` / `cache_creation_input_tokens`) or Anthropic's error body. The
SDK's base URL is `server.base_url` (no /v1: the SDK appends it). Both `x-api-key` and
`Authorization: Bearer` credentials are accepted. What each model refuses, under the
request's `anthropic-version`, is checked by `testing.llm.strict`.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from core.llm.profiles import THINKING_BUDGETS, resolve
from core.llm.retry import SPEND_LIMIT_CODES
from core.llm.scripted import Reply
from core.llm.types import ChatMessage, GenerateConfig, ImagePart, Part, TextPart, Usage

from ._decode import decode_b64
from .base import FakeServer, WireError
from .schema_rules import check_anthropic_schema
from .strict import check_anthropic
from .thinking import anthropic_thinking_tokens

__all__ = ["AnthropicServer"]

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                529: "overloaded_error"}
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}


def _blocks(content: Any) -> tuple[str | list[Part], bool]:
    """(parts, whether any block carries cache_control)."""
    if isinstance(content, str):
        return content, False
    if not isinstance(content, list) or not content:
        raise WireError(400, "content must be a string or a non-empty list of blocks")
    parts: list[Part] = []
    cached = False
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(TextPart(text=block["text"]))
        elif kind == "image" and isinstance(block.get("source"), dict):
            source = block["source"]
            if source.get("type") != "base64":
                raise WireError(400, "only base64 image sources are supported")
            parts.append(ImagePart(data=decode_b64(source.get("data")),
                                   media_type=source.get("media_type", "image/png")))
        else:
            raise WireError(400, f"unsupported content block: {kind!r}")
        cached = cached or "cache_control" in block
    return parts, cached


def _forced_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The tool a request forces (`tool_choice` {"type": "tool", "name": ...}), if any."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("type") != "tool":
        return None
    given = body.get("tools")
    tools: list[Any] = given if isinstance(given, list) else []
    found = next((t for t in tools if isinstance(t, dict) and t.get("name") == choice.get("name")), None)
    if found is None:
        raise WireError(400, f"tool_choice: tool {choice.get('name')!r} is not in tools")
    return found


class AnthropicServer(FakeServer):
    path = "/v1/messages"
    kind = "anthropic"

    @property
    def base_url(self) -> str:
        return self.root_url

    def check(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        if isinstance(body.get("model"), str):
            check_anthropic(body, headers)

    def parse(self, body: Any) -> tuple[list[ChatMessage], GenerateConfig]:
        if not isinstance(body.get("model"), str):
            raise WireError(400, "model: Field required")
        if not isinstance(body.get("max_tokens"), int):
            raise WireError(400, "max_tokens: Field required")
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise WireError(400, "messages: at least one message is required")
        messages: list[ChatMessage] = []
        system = body.get("system")
        if system is not None:
            content, cached = _blocks(system)
            messages.append(ChatMessage(role="system", content=content, cache=cached))
        for item in raw:
            role = item.get("role") if isinstance(item, dict) else None
            if role not in ("user", "assistant"):
                raise WireError(400, f"messages: unexpected role {role!r}")
            content, cached = _blocks(item.get("content"))
            messages.append(ChatMessage(role=role, content=content, cache=cached))
        thinking = body.get("thinking") or {}
        effort = (body.get("output_config") or {}).get("effort")
        budget = int(thinking.get("budget_tokens", 0) or 0)
        config = GenerateConfig(
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            max_tokens=body["max_tokens"] - budget,
            reasoning_effort=effort or next((e for e, b in THINKING_BUDGETS.items() if b == budget), None),
            stop=body.get("stop_sequences"),
        )
        return messages, config

    def reply_schema(self, body: dict[str, Any]) -> dict[str, Any] | None:
        profile = resolve(f"anthropic/{body.get('model')}")
        given = body.get("output_config")
        fmt = given.get("format") if isinstance(given, dict) else None
        forced = _forced_tool(body)
        if fmt is None and forced is None:
            return None
        if profile.structured not in ("anthropic", "anthropic_tool"):
            raise WireError(400, "output_config.format: structured outputs are not supported for this model")
        turns = body.get("messages") or []
        if fmt is not None:
            if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
                raise WireError(400, "output_config.format.type: Input should be 'json_schema'")
            if turns and isinstance(turns[-1], dict) and turns[-1].get("role") == "assistant":
                raise WireError(400, "output_config.format: structured outputs cannot be used with a prefilled "
                                     "assistant turn")
            return check_anthropic_schema(fmt.get("schema"), "output_config.format.schema")
        assert forced is not None
        schema = forced.get("input_schema")
        if forced.get("strict"):
            return check_anthropic_schema(schema, f"tools.{forced.get('name')}.input_schema")
        return schema if isinstance(schema, dict) else None

    def format_name(self, body: dict[str, Any]) -> str:
        forced = _forced_tool(body)
        return str(forced["name"]) if forced is not None else "reply"

    def thinking(self, body: dict[str, Any], reply: Reply) -> int:
        return anthropic_thinking_tokens(resolve(f"anthropic/{body['model']}"), body, reply)

    def output_limit(self, body: dict[str, Any]) -> int | None:
        return int(body["max_tokens"])

    def render(self, body: Any, reply: Reply, usage: Usage, thinking: int) -> dict[str, Any]:
        fresh = max(usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens, 0)
        # The model thought: a thinking block comes before the text, its text omitted as by
        # default on Claude 5.x (display "omitted").
        blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": "", "signature": "local"}] if thinking else []
        stop = "refusal" if reply.finish_reason == "refusal" else _STOP_REASONS.get(reply.finish_reason,
                                                                                     reply.finish_reason)
        forced = _forced_tool(body)
        if forced is not None and reply.finish_reason == "stop":
            # A forced tool's input is the answer, and the turn stops for the tool.
            blocks.append({"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": forced["name"],
                           "input": json.loads(reply.text)})
            stop = "tool_use"
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": blocks if forced is not None and stop == "tool_use" else
            [*blocks, *([{"type": "text", "text": reply.text}] if reply.text or not blocks else [])],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": fresh,
                "output_tokens": usage.output_tokens,
                "cache_creation_input_tokens": usage.cache_write_tokens,
                "cache_read_input_tokens": usage.cached_tokens,
            },
        }

    def error_body(self, status: int, message: str, code: str | None = None) -> dict[str, Any]:
        if code in SPEND_LIMIT_CODES:
            # A spend limit is a 429 rate_limit_error (402 for a linked organization) whose
            # details name the cause; the SDK raises its own class for each code.
            kind = _ERROR_TYPES.get(status, "api_error")
            return {"type": "error", "error": {"type": kind, "message": message, "details": {"error_code": code}}}
        kind = code or _ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def refusal_body(self, error: WireError) -> dict[str, Any]:
        body = self.error_body(error.status, error.message)
        body["error"]["type"] = error.kind or body["error"]["type"]
        return body
