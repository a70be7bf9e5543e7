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

from ..errors import MalformedReplyError, RefusalError, status_line
from ..profiles import (
    THINKING_BUDGETS,
    UnsupportedSettingError,
    anthropic_thinking,
    problems,
    sampling_params,
)
from ..provider import ModelAPI, rate_limit_headers, resolve_api_key
from ..retry import RetryDecision, decide_status, parse_retry_after
from ..structured import ReplyFormat, for_provider
from ..types import ChatMessage, GenerateConfig, ImagePart, ModelOutput, Usage

__all__ = ["THINKING_BUDGETS", "AnthropicAPI", "to_anthropic"]

#: The Messages API requires `max_tokens`; used when the config leaves it unset.
DEFAULT_MAX_TOKENS = 4096
#: The API accepts at most this many cache breakpoints per request.
MAX_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "stop"}


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
        kind = thinking.get("thinking", {}).get("type")
        thinks = kind in ("enabled", "adaptive") or (kind is None and profile.thinks_by_default)
        found = problems(profile, config, thinking=thinks)
        if found:
            raise UnsupportedSettingError(f"{found[0]}; remove it from the config")
        system, turns = to_anthropic(messages)
        params: dict[str, Any] = {"model": self.model, "messages": turns, **thinking}
        if system:
            params["system"] = system
        if config.stop:
            params["stop_sequences"] = list(config.stop)
        sampling = sampling_params(profile, config, thinking=thinks)
        if sampling:
            # The 2.x SDK has no sampling arguments; only older API versions take them.
            params["extra_body"] = sampling
        if config.reply_format is not None and profile.structured != "none":
            self.add_format(params, config.reply_format, profile.structured, thinks=thinks)
        return params

    def add_format(self, params: dict[str, Any], fmt: ReplyFormat, mechanism: str, *, thinks: bool) -> None:
        """Claude's structured outputs: `output_config.format`, or a forced strict tool (which
        the API refuses while the model thinks)."""
        schema = for_provider(fmt.json_schema, mechanism)
        if mechanism == "anthropic":
            params["output_config"] = {**params.get("output_config", {}),
                                       "format": {"type": "json_schema", "schema": schema}}
        elif mechanism == "anthropic_tool":
            if thinks:
                raise UnsupportedSettingError(f"{self.name} thinks, and a forced tool cannot be used while it "
                                              "does; set structured: anthropic for this model")
            tool: dict[str, Any] = {"name": fmt.name, "input_schema": schema, "strict": True}
            if fmt.description:
                tool["description"] = fmt.description
            params.update(tools=[tool], tool_choice={"type": "tool", "name": fmt.name})
        else:
            raise UnsupportedSettingError(f"{self.name} speaks the Messages API; structured outputs "
                                          f"{mechanism!r} belong to another protocol (set structured: anthropic)")

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        params = self.request(messages, config)
        structured = "tool_choice" in params or "format" in params.get("output_config", {})
        try:
            raw = await self.client.messages.with_raw_response.create(**params)
            response = await raw.parse()
        except json.JSONDecodeError as exc:
            raise MalformedReplyError(f"the reply body is not valid JSON ({exc})") from exc
        return self.parse(response, structured=structured).model_copy(
            update={"rate_headers": rate_limit_headers(raw.headers)})

    def parse(self, response: Any, *, structured: bool = False) -> ModelOutput:
        """Validate the reply ourselves: the SDK accepts even `{}`."""
        content = getattr(response, "content", None)
        usage = getattr(response, "usage", None)
        if not isinstance(content, list) or usage is None:
            raise MalformedReplyError("the reply has no content or usage (empty or malformed body)")
        # Separate text blocks are separate paragraphs (e.g. around a tool call or thinking);
        # a forced tool's input is the structured reply.
        text = "\n".join(getattr(b, "text", "") or "" for b in content if getattr(b, "type", None) == "text")
        called = [b for b in content if getattr(b, "type", None) == "tool_use"]
        if structured and called and not text:
            text = json.dumps(getattr(called[0], "input", None), ensure_ascii=False)
        fresh = int(getattr(usage, "input_tokens", 0) or 0)
        read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
        written = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
        spent = Usage(input_tokens=fresh + read + written, cached_tokens=read, cache_write_tokens=written,
                      output_tokens=int(getattr(usage, "output_tokens", 0) or 0))
        stop = getattr(response, "stop_reason", None)
        if stop == "refusal":
            said = " ".join(text.split())[:200]
            raise RefusalError("the model refused to answer (stop_reason: refusal)"
                               + (f"; it wrote: {said}" if said else ""), usage=spent)
        return ModelOutput(text=text, model=str(getattr(response, "model", None) or self.model), usage=spent,
                           finish_reason=_STOP_REASONS.get(stop, stop) if stop else None, structured=structured)

    def classify(self, error: BaseException) -> RetryDecision:
        if isinstance(error, anthropic.APIStatusError):
            body: dict[str, Any] = error.body if isinstance(error.body, dict) else {}
            found = body.get("error")
            detail: dict[str, Any] = found if isinstance(found, dict) else {}
            found_details = detail.get("details")
            details: dict[str, Any] = found_details if isinstance(found_details, dict) else {}
            code = getattr(error, "error_code", None) or details.get("error_code") or ""
            text = f"{error.message} {detail.get('type') or ''} {code} {detail.get('message') or ''}"
            return decide_status(error.status_code, text, parse_retry_after(error.response.headers))
        if isinstance(error, anthropic.APITimeoutError):
            return RetryDecision.transient("timeout")
        if isinstance(error, anthropic.APIConnectionError):
            return RetryDecision.transient("connection")
        if isinstance(error, anthropic.APIResponseValidationError):
            return RetryDecision.transient("malformed")  # a garbled body is the wire's fault: ask again
        return super().classify(error)

    def describe(self, error: BaseException) -> str:
        if isinstance(error, anthropic.APIStatusError):
            return status_line(error.status_code, error.body, error.message)
        return super().describe(error)

    async def aclose(self) -> None:
        await self.client.close()
