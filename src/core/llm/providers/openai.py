"""`openai/<model>`: the Chat Completions API through the official SDK.

Subclasses in `openai_compatible` reuse it for servers that speak the same protocol and
differ only in base URL, key variable and a few parameter names.
"""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

import openai

from ..errors import MalformedReplyError, RefusalError, status_line
from ..profiles import UnsupportedSettingError, problems, sampling_params
from ..provider import ModelAPI, rate_limit_headers, resolve_api_key
from ..retry import RetryDecision, decide_status, parse_retry_after
from ..structured import ReplyFormat, for_provider
from ..types import ChatMessage, GenerateConfig, ImagePart, ModelOutput, Usage

__all__ = ["OpenAIAPI", "to_openai_messages"]


def to_openai_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Chat Completions messages; images become base64 data URLs."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message.content, str) or message.role != "user":
            out.append({"role": message.role, "content": message.text()})
            continue
        parts: list[dict[str, Any]] = []
        for part in message.parts():
            if isinstance(part, ImagePart):
                url = f"data:{part.media_type};base64,{part.b64()}"
                parts.append({"type": "image_url", "image_url": {"url": url, "detail": part.detail}})
            else:
                parts.append({"type": "text", "text": part.text})
        out.append({"role": "user", "content": parts})
    return out


class OpenAIAPI(ModelAPI):
    provider = "openai"
    default_max_connections = 32
    #: Environment variable holding the key, and whether a key is required at all.
    key_variable: ClassVar[str] = "OPENAI_API_KEY"
    key_required: ClassVar[bool] = True
    #: Environment variable that may override the default base URL.
    base_url_variable: ClassVar[str] = "OPENAI_BASE_URL"
    default_base_url: ClassVar[str | None] = None

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0) -> None:
        name = f"{self.provider}/{model}"
        key = resolve_api_key(name, api_key, self.key_variable, required=self.key_required)
        url = base_url or os.environ.get(self.base_url_variable) or self.default_base_url
        super().__init__(model, base_url=url, api_key=key, timeout=timeout)
        self.client = openai.AsyncOpenAI(api_key=key or "unused", base_url=url, timeout=timeout,
                                         max_retries=0)

    def request(self, messages: list[ChatMessage], config: GenerateConfig) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` for this call, shaped by the
        model's profile (token-limit field, the sampling it takes, reasoning effort)."""
        profile = self.profile
        found = problems(profile, config)
        if found:
            raise UnsupportedSettingError(f"{found[0]}; remove it from the config")
        params: dict[str, Any] = {"model": self.model, "messages": to_openai_messages(messages)}
        sampling = sampling_params(profile, config)
        if "top_k" in sampling:  # not a Chat Completions argument: servers that take it read the body
            params["extra_body"] = {"top_k": sampling.pop("top_k")}
        params.update(sampling)
        if config.stop:
            params["stop"] = list(config.stop)
        if config.max_tokens is not None:
            params[profile.token_field] = config.max_tokens
        if config.reasoning_effort is not None and profile.reasoning != "none":
            self.add_reasoning(params, config.reasoning_effort)
        if config.reply_format is not None and profile.structured != "none":
            self.add_format(params, config.reply_format, profile.structured)
        return params

    def announces_rate_limits(self) -> bool:
        return self.provider == "openai" and (self.base_url is None or "api.openai.com" in self.base_url)

    def add_format(self, params: dict[str, Any], fmt: ReplyFormat, mechanism: str) -> None:
        """Ask for a reply in `fmt` the way `mechanism` does (`core.llm.structured`)."""
        schema = for_provider(fmt.json_schema, mechanism)
        spec: dict[str, Any] = {"name": fmt.name, "schema": schema}
        if fmt.description:
            spec["description"] = fmt.description
        if mechanism == "openai_strict":
            params["response_format"] = {"type": "json_schema", "json_schema": {**spec, "strict": True}}
        elif mechanism == "json_schema":
            params["response_format"] = {"type": "json_schema", "json_schema": spec}
        elif mechanism == "vllm":
            params.setdefault("extra_body", {})["structured_outputs"] = {"json": schema}
        elif mechanism == "guided_json":
            params.setdefault("extra_body", {})["guided_json"] = schema
        else:
            raise UnsupportedSettingError(f"{self.name} speaks Chat Completions; structured outputs "
                                          f"{mechanism!r} belong to another protocol (set structured: "
                                          "openai_strict or json_schema for this model)")

    def add_reasoning(self, params: dict[str, Any], effort: str) -> None:
        params["reasoning_effort"] = effort

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        params = self.request(messages, config)
        structured = "response_format" in params or bool(
            {"structured_outputs", "guided_json"} & set(params.get("extra_body") or {}))
        try:
            raw = await self.client.chat.completions.with_raw_response.create(**params)
            response = raw.parse()
        except json.JSONDecodeError as exc:
            raise MalformedReplyError(f"the reply body is not valid JSON ({exc})") from exc
        return self.parse(response, structured=structured).model_copy(
            update={"rate_headers": rate_limit_headers(raw.headers)})

    def parse(self, response: Any, *, structured: bool = False) -> ModelOutput:
        """Validate the reply ourselves: the SDK accepts even `{}`."""
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise MalformedReplyError("the reply has no choices (empty or malformed body)")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        if message is None or not isinstance(content, (str, type(None))):
            raise MalformedReplyError("the reply's first choice has no message")
        usage = getattr(response, "usage", None)
        details = getattr(usage, "prompt_tokens_details", None)
        spent = Usage(
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cached_tokens=int(getattr(details, "cached_tokens", 0) or 0),
            # GPT-5.6 and later bill prompt-cache writes at their own rate (1.25x input).
            cache_write_tokens=int(getattr(details, "cache_write_tokens", 0) or 0),
        )
        refusal = getattr(message, "refusal", None)
        if isinstance(refusal, str) and refusal.strip():
            raise RefusalError(f"the model refused to answer: {' '.join(refusal.split())[:200]}", usage=spent)
        finish = getattr(choices[0], "finish_reason", None)
        if finish == "content_filter":
            raise RefusalError("the provider's content filter stopped the reply (finish_reason: content_filter)",
                               kind="content_filter", usage=spent)
        return ModelOutput(text=content or "", model=str(getattr(response, "model", None) or self.model),
                           usage=spent, finish_reason=finish, structured=structured)

    def classify(self, error: BaseException) -> RetryDecision:
        if isinstance(error, openai.APIStatusError):
            body = error.body if isinstance(error.body, dict) else {}
            detail = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
            text = (f"{error.message} {detail.get('code') or ''} {detail.get('type') or ''} "
                    f"{detail.get('message') or ''}")
            return decide_status(error.status_code, text, parse_retry_after(error.response.headers))
        if isinstance(error, openai.APITimeoutError):
            return RetryDecision.transient("timeout")
        if isinstance(error, openai.APIConnectionError):
            return RetryDecision.transient("connection")
        if isinstance(error, openai.APIResponseValidationError):
            return RetryDecision.transient("malformed")  # a garbled body is the wire's fault: ask again
        return super().classify(error)

    def describe(self, error: BaseException) -> str:
        if isinstance(error, openai.APIStatusError):
            return status_line(error.status_code, error.body, error.message)
        return super().describe(error)

    async def aclose(self) -> None:
        await self.client.close()
