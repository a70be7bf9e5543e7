"""A local OpenAI Chat Completions server: `POST /v1/chat/completions`.

It reads the real request shape (string or part-list content, base64 `image_url` parts,
`max_tokens` or `max_completion_tokens`, `reasoning_effort`, ...) and answers with the real
response shape (`chatcmpl-` ids, usage with `prompt_tokens_details.cached_tokens`, finish
reasons) or OpenAI's error body. The SDK's base URL is `server.base_url` (ends in /v1).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from core.llm.profiles import resolve
from core.llm.retry import SPEND_LIMIT_CODES, decide_status
from core.llm.scripted import Reply
from core.llm.types import ChatMessage, GenerateConfig, ImagePart, Part, TextPart, Usage

from ._decode import decode_data_url
from .base import FakeServer, WireError
from .schema_rules import check_openai_schema, check_valid_schema
from .strict import check_openai
from .thinking import openai_reasoning_tokens

__all__ = ["OpenAIServer"]

_ROLES: dict[object, Literal["system", "user", "assistant"]] = {
    "system": "system", "developer": "system", "user": "user", "assistant": "assistant",
}
_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
                404: "invalid_request_error", 429: "rate_limit_exceeded"}


def _parts(content: Any) -> str | list[Part]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise WireError(400, "message content must be a string or a list of parts")
    parts: list[Part] = []
    for item in content:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text" and isinstance(item.get("text"), str):
            parts.append(TextPart(text=item["text"]))
        elif kind == "image_url" and isinstance(item.get("image_url"), dict):
            media_type, data = decode_data_url(item["image_url"].get("url"))
            detail = item["image_url"].get("detail", "auto")
            parts.append(ImagePart(data=data, media_type=media_type,
                                   detail=detail if detail in ("auto", "low", "high") else "auto"))
        else:
            raise WireError(400, f"unsupported content part: {kind!r}")
    return parts


class OpenAIServer(FakeServer):
    path = "/v1/chat/completions"
    kind = "openai"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def check(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        if isinstance(body.get("model"), str):
            check_openai(body, self.provider)

    def parse(self, body: Any) -> tuple[list[ChatMessage], GenerateConfig]:
        if not isinstance(body.get("model"), str):
            raise WireError(400, "you must provide a model parameter")
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise WireError(400, "'messages' must be a non-empty array")
        messages = []
        for item in raw:
            role = _ROLES.get(item.get("role")) if isinstance(item, dict) else None
            if role is None:
                raise WireError(400, f"invalid message: {item!r:.80}")
            messages.append(ChatMessage(role=role, content=_parts(item.get("content", ""))))
        stop = body.get("stop")
        config = GenerateConfig(
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            seed=body.get("seed"),
            max_tokens=body.get("max_completion_tokens", body.get("max_tokens")),
            reasoning_effort=body.get("reasoning_effort"),
            stop=[stop] if isinstance(stop, str) else stop,
        )
        return messages, config

    def reply_schema(self, body: dict[str, Any]) -> dict[str, Any] | None:
        profile = resolve(f"{self.provider}/{body.get('model')}")
        if self.provider == "vllm":
            given = body.get("structured_outputs")
            constraints = given if isinstance(given, dict) else {}
            kinds = [k for k in ("json", "regex", "choice") if constraints.get(k) is not None]
            if len(kinds) > 1:
                raise WireError(400, "You can only use one kind of constraints for structured outputs "
                                "('json', 'regex' or 'choice').")
            if "json" in kinds:
                schema = constraints["json"]
                schema = json.loads(schema) if isinstance(schema, str) else schema
                check_valid_schema(schema, "structured_outputs.json")
                return schema  # type: ignore[no-any-return]
        wanted = body.get("response_format")
        if not isinstance(wanted, dict) or wanted.get("type") != "json_schema":
            return None
        if profile.structured == "none":
            raise WireError(400, f"Invalid parameter: 'response_format' of type 'json_schema' is not supported "
                            f"with model {body.get('model')}.", param="response_format", code="invalid_parameter")
        if self.provider in ("openai", "openrouter"):
            return check_openai_schema(wanted)
        found = wanted.get("json_schema")
        spec: dict[str, Any] = found if isinstance(found, dict) else {}
        schema = spec.get("schema")
        check_valid_schema(schema, "response_format.json_schema.schema")
        return schema  # type: ignore[no-any-return]

    def format_name(self, body: dict[str, Any]) -> str:
        wanted = body.get("response_format")
        spec = wanted.get("json_schema") if isinstance(wanted, dict) else None
        name = spec.get("name") if isinstance(spec, dict) else None
        return name if isinstance(name, str) and name else "reply"

    def thinking(self, body: dict[str, Any], reply: Reply) -> int:
        return openai_reasoning_tokens(resolve(f"{self.provider}/{body['model']}"), body, reply)

    def output_limit(self, body: dict[str, Any]) -> int | None:
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        return int(limit) if isinstance(limit, int) else None

    def render(self, body: Any, reply: Reply, usage: Usage, thinking: int) -> dict[str, Any]:
        refused = reply.finish_reason == "refusal"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "system_fingerprint": "fp_local",
            "choices": [{
                "index": 0,
                # A refusal comes in its own field with no content, and the reply stops normally.
                "message": {"role": "assistant", "content": None if refused else reply.text,
                            "refusal": (reply.refusal or reply.text) if refused else None},
                "logprobs": None,
                "finish_reason": "stop" if refused else reply.finish_reason,
            }],
            "usage": {
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "total_tokens": usage.input_tokens + usage.output_tokens,
                "prompt_tokens_details": {"cached_tokens": usage.cached_tokens, "audio_tokens": 0,
                                          "cache_write_tokens": usage.cache_write_tokens},
                "completion_tokens_details": {"reasoning_tokens": thinking, "audio_tokens": 0,
                                              "accepted_prediction_tokens": 0,
                                              "rejected_prediction_tokens": 0},
            },
        }

    def error_body(self, status: int, message: str, code: str | None = None) -> dict[str, Any]:
        decision = decide_status(status, message)
        code = code or ("context_length_exceeded" if decision.reason == "context_length" else None)
        kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        kind = code if code == "insufficient_quota" else kind  # OpenAI sends it as both type and code
        if code in (*SPEND_LIMIT_CODES, "credit_balance_exhausted", "organization_usage_limit_exceeded"):
            kind = "insufficient_quota"  # billing errors keep the broad type, the code names the cause
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def refusal_body(self, error: WireError) -> dict[str, Any]:
        body = self.error_body(error.status, error.message)
        body["error"].update(code=error.code, param=error.param,
                             type=error.kind or body["error"]["type"])
        return body
