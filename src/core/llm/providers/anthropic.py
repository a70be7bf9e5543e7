"""`anthropic/<model>`: the Messages API through the official SDK.

The system prompt travels separately; messages marked `cache=True` and the system prompt
get `cache_control` breakpoints (at most four, the latest kept), so a stable prefix is
served from the prompt cache. What is sent follows the model's profile under the API
version the installed SDK sends: reasoning effort becomes adaptive thinking or a thinking
budget, and sampling values only where that version and model take them.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anthropic

from ..errors import MalformedReplyError
from ..profiles import (
    THINKING_BUDGETS,
    UnsupportedSettingError,
    anthropic_thinking,
    problems,
    sampling_params,
)
from ..provider import ModelAPI, rate_limit_headers, resolve_api_key
from ..retry import RetryDecision, decide_status, parse_retry_after
from ..types import ChatMessage, GenerateConfig, ImagePart, ModelOutput, Usage

__all__ = ["THINKING_BUDGETS", "AnthropicAPI", "to_anthropic"]

#: The Messages API requires `max_tokens`; used when the config leaves it unset.
DEFAULT_MAX_TOKENS = 4096
#: The API accepts at most this many cache breakpoints per request.
MAX_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts():
        if isinstance(part, ImagePart):
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": part.media_type,
                                                        "data": part.b64()}})
        else:
            blocks.append({"type": "text", "text": part.text})
    return blocks


def to_anthropic(messages: list[ChatMessage]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, messages) with cache breakpoints; consecutive same-role turns merge."""
    system: list[dict[str, Any]] = [{"type": "text", "text": m.text()} for m in messages if m.role == "system" and m.text()]
    turns = [m for m in messages if m.role != "system"]
    budget = MAX_BREAKPOINTS - (1 if system else 0)
    marked = {i for i, m in enumerate(turns) if m.cache}
    keep = set(sorted(marked)[-budget:]) if budget > 0 else set()
    out: list[dict[str, Any]] = []
    for index, message in enumerate(turns):
        blocks = _blocks(message)
        if index in keep and blocks:
            blocks[-1] = {**blocks[-1], "cache_control": dict(_EPHEMERAL)}
        if out and out[-1]["role"] == message.role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": message.role, "content": blocks})
    if system:
        system[-1]["cache_control"] = dict(_EPHEMERAL)
    return system, out


class AnthropicAPI(ModelAPI):
    provider = "anthropic"
    default_max_connections = 16

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0) -> None:
        key = resolve_api_key(f"anthropic/{model}", api_key, "ANTHROPIC_API_KEY")
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        super().__init__(model, base_url=url, api_key=key, timeout=timeout)
        self.client = anthropic.AsyncAnthropic(api_key=key, base_url=url, timeout=timeout, max_retries=0)

    def announces_rate_limits(self) -> bool:
        return self.base_url is None or "api.anthropic.com" in self.base_url

    def request(self, messages: list[ChatMessage], config: GenerateConfig) -> dict[str, Any]:
        """The keyword arguments of `messages.create` for this call."""
        profile = self.profile
        thinking = anthropic_thinking(profile, config.reasoning_effort, config.max_tokens or DEFAULT_MAX_TOKENS)
        found = problems(profile, config, thinking="thinking" in thinking)
        if found:
            raise UnsupportedSettingError(f"{found[0]}; remove it from the config")
        system, turns = to_anthropic(messages)
        params: dict[str, Any] = {"model": self.model, "messages": turns, **thinking}
        if system:
            params["system"] = system
        if config.stop:
            params["stop_sequences"] = list(config.stop)
        sampling = sampling_params(profile, config, thinking="thinking" in thinking)
        if sampling:
            # The 2.x SDK has no sampling arguments; only older API versions take them.
            params["extra_body"] = sampling
        return params

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        try:
            raw = await self.client.messages.with_raw_response.create(**self.request(messages, config))
            response = await raw.parse()
        except json.JSONDecodeError as exc:
            raise MalformedReplyError(f"the reply body is not valid JSON ({exc})") from exc
        return self.parse(response).model_copy(update={"rate_headers": rate_limit_headers(raw.headers)})

    def parse(self, response: Any) -> ModelOutput:
        """Validate the reply ourselves: the SDK accepts even `{}`."""
        content = getattr(response, "content", None)
        usage = getattr(response, "usage", None)
        if not isinstance(content, list) or usage is None:
            raise MalformedReplyError("the reply has no content or usage (empty or malformed body)")
        # Separate text blocks are separate paragraphs (e.g. around a tool call or thinking).
        text = "\n".join(getattr(b, "text", "") or "" for b in content if getattr(b, "type", None) == "text")
        fresh = int(getattr(usage, "input_tokens", 0) or 0)
        read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
        written = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
        stop = getattr(response, "stop_reason", None)
        return ModelOutput(
            text=text,
            model=str(getattr(response, "model", None) or self.model),
            usage=Usage(input_tokens=fresh + read + written, cached_tokens=read,
                        cache_write_tokens=written,
                        output_tokens=int(getattr(usage, "output_tokens", 0) or 0)),
            finish_reason=_STOP_REASONS.get(stop, stop) if stop else None,
        )

    def classify(self, error: BaseException) -> RetryDecision:
        if isinstance(error, anthropic.APIStatusError):
            body: dict[str, Any] = error.body if isinstance(error.body, dict) else {}
            found = body.get("error")
            detail: dict[str, Any] = found if isinstance(found, dict) else {}
            text = f"{error.message} {detail.get('type') or ''} {detail.get('message') or ''}"
            return decide_status(error.status_code, text, parse_retry_after(error.response.headers))
        if isinstance(error, anthropic.APITimeoutError):
            return RetryDecision.transient("timeout")
        if isinstance(error, anthropic.APIConnectionError):
            return RetryDecision.transient("connection")
        if isinstance(error, anthropic.APIResponseValidationError):
            return RetryDecision.transient("malformed")  # a garbled body is the wire's fault: ask again
        return super().classify(error)

    async def aclose(self) -> None:
        await self.client.close()
