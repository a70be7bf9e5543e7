"""A strict scripted model, registered as provider `scripted/<name>`.

`Script("s", [Reply(text="hi"), Reply(error=429), lambda req: "dynamic"])` registers a
script; `ChatModel.from_name("scripted/s")` plays its steps in order. A call beyond the
last step raises `ScriptError` (and is remembered, so `assert_done()` fails too); unused
steps make `assert_done()` fail; every request is kept in `script.requests`. The same
scripts drive the local HTTP servers of `testing.llm`, which turn `error` and
`fault` into real HTTP faults.

Usage is estimated (`Usage.estimated`): text at about 4 characters a token, images by the
published rules of the provider the script stands in for (`core.llm.image_tokens`):
`Script(..., image_rules="anthropic")`, else the environment variable
`AGENT_S3_SCRIPTED_IMAGE_RULES`, else OpenAI's.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from .errors import MalformedReplyError, RefusalError, ScriptError
from .image_tokens import ImageRules, image_tokens
from .provider import ModelAPI, current_module
from .retry import RetryDecision, decide_status, parse_retry_after
from .types import ChatMessage, GenerateConfig, ImagePart, ModelOutput, Usage

__all__ = [
    "IMAGE_RULES_ENV",
    "Reply",
    "Script",
    "ScriptRequest",
    "ScriptedAPI",
    "ScriptedHTTPError",
    "default_image_rules",
    "estimate_usage",
]

#: Environment variable naming the image rules of scripts that set none ("openai", "anthropic").
IMAGE_RULES_ENV = "AGENT_S3_SCRIPTED_IMAGE_RULES"


@dataclass(frozen=True)
class ScriptRequest:
    """What the scripted model was asked."""

    messages: list[ChatMessage]
    config: GenerateConfig
    #: The calling module, or where the request came from ("http:openai") for the servers.
    module: str


@dataclass(frozen=True)
class Reply:
    """One scripted step: a reply, an error, or a fault."""

    text: str = ""
    #: Seconds to wait before answering (or failing).
    delay: float = 0.0
    #: An exception to raise, or an HTTP status to fail with.
    error: BaseException | int | None = None
    #: Retry-After for an HTTP error (seconds, or an HTTP date string).
    retry_after: float | str | None = None
    #: Error message for an HTTP error (e.g. "maximum context length exceeded").
    message: str | None = None
    #: The protocol's error code for an HTTP error (OpenAI `code`/`type`, Anthropic `type`),
    #: e.g. "insufficient_quota", "model_not_found", "billing_error".
    code: str | None = None
    #: Extra response headers of an HTTP error (e.g. "x-ratelimit-reset-requests": "6m0s").
    headers: dict[str, str] | None = None
    #: HTTP-level fault: drop the connection, answer a malformed / empty body, or (with an
    #: `error` status) answer that status with a proxy's HTML error page.
    fault: Literal["drop", "malformed", "empty", "html"] | None = None
    #: Usage to report instead of the estimate (e.g. to report cached tokens); the strict
    #: servers then simulate no thinking.
    usage: Usage | None = None
    #: "stop", "length" (cut at the limit), "refusal" (Claude's stop reason; OpenAI's
    #: `refusal` field holds `refusal`) or "content_filter" (OpenAI's filter).
    finish_reason: str = "stop"
    #: OpenAI's refusal text (with finish_reason "refusal"); Claude's refusal keeps `text`.
    refusal: str | None = None
    #: Tokens a strict server's model thinks before this reply (None: its effort's usual
    #: amount, `testing.llm.thinking`), counted against the request's output limit.
    thinking_tokens: int | None = None


Step = Reply | Callable[[ScriptRequest], "str | Reply"]


class ScriptedHTTPError(Exception):
    """The in-process stand-in for an HTTP error status."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after


@dataclass(eq=False)
class Script:
    """Registers itself under `name`; a later script of the same name replaces it."""

    name: str
    steps: list[Step]
    requests: list[ScriptRequest] = field(default_factory=list)
    #: Messages of calls that found no step left.
    overruns: list[str] = field(default_factory=list)
    #: Whose image-token rules the usage estimate follows (None: `default_image_rules()`).
    image_rules: ImageRules | None = None

    _registry: ClassVar[dict[str, Script]] = {}

    def __post_init__(self) -> None:
        self.steps = list(self.steps)
        self._next = 0
        Script._registry[self.name] = self

    @classmethod
    def get(cls, name: str) -> Script:
        try:
            return cls._registry[name]
        except KeyError:
            raise ScriptError(f"no script named {name!r} is registered; create Script({name!r}, [...]) first") from None

    @classmethod
    def clear_registry(cls) -> None:
        cls._registry.clear()

    @property
    def remaining(self) -> int:
        return len(self.steps) - self._next

    def take(self, request: ScriptRequest) -> Reply:
        """Record the request and return the next step as a `Reply`."""
        self.requests.append(request)
        if self._next >= len(self.steps):
            message = (f"script {self.name!r} got call {len(self.requests)} but has only "
                       f"{len(self.steps)} steps")
            self.overruns.append(message)
            raise ScriptError(message)
        step = self.steps[self._next]
        self._next += 1
        if isinstance(step, Reply):
            return step
        result = step(request)
        return result if isinstance(result, Reply) else Reply(text=str(result))

    def assert_done(self) -> None:
        """Fail if any step is unused or any call found no step."""
        if self.overruns:
            raise ScriptError("; ".join(self.overruns))
        if self.remaining:
            raise ScriptError(f"script {self.name!r} has {self.remaining} unused steps "
                              f"of {len(self.steps)}")


def default_image_rules() -> ImageRules:
    """The image rules named by `IMAGE_RULES_ENV`, OpenAI's when it is unset."""
    value = os.environ.get(IMAGE_RULES_ENV, "").strip().lower() or "openai"
    if value == "openai":
        return "openai"
    if value == "anthropic":
        return "anthropic"
    raise ValueError(f"{IMAGE_RULES_ENV}={value!r} is not known; set it to openai or anthropic")


def estimate_usage(messages: list[ChatMessage], text: str, rules: ImageRules | None = None) -> Usage:
    """A deterministic estimate (about 4 characters a token; each image by its size under
    the provider's published rules), so ledgers of scripted runs have figures that scale
    like a real bill; it is not any tokenizer's count."""
    rules = rules or default_image_rules()
    prompt = 0
    for message in messages:
        prompt += 4
        for part in message.parts():
            if isinstance(part, ImagePart):
                prompt += image_tokens(part.data, rules, part.detail)
            else:
                prompt += math.ceil(len(part.text) / 4)
    return Usage(input_tokens=prompt, output_tokens=math.ceil(len(text) / 4), estimated=True)


class ScriptedAPI(ModelAPI):
    """Plays the script named by the model part of `scripted/<name>`."""

    provider = "scripted"
    default_max_connections = 64

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0) -> None:
        super().__init__(model, base_url=base_url, api_key=api_key, timeout=timeout)
        self.script = Script.get(model)

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        module = current_module.get()
        reply = self.script.take(ScriptRequest(list(messages), config, module))
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if isinstance(reply.error, BaseException):
            raise reply.error
        if isinstance(reply.error, int):
            retry_after = (None if reply.retry_after is None
                           else parse_retry_after({"retry-after": str(reply.retry_after)}))
            raise ScriptedHTTPError(reply.error, reply.message or "scripted error", retry_after)
        if reply.fault == "drop":
            raise ConnectionResetError("scripted dropped connection")
        if reply.fault in ("malformed", "empty"):
            raise MalformedReplyError(f"the reply body was {reply.fault}")
        usage = reply.usage or estimate_usage(messages, reply.text, self.script.image_rules)
        if reply.finish_reason in ("refusal", "content_filter"):
            raise RefusalError(f"the model refused to answer: {reply.refusal or reply.text}"
                               if reply.finish_reason == "refusal" else "the content filter stopped the reply",
                               kind=reply.finish_reason, usage=usage)
        return ModelOutput(text=reply.text, model=self.model, usage=usage,
                           finish_reason=reply.finish_reason)

    def classify(self, error: BaseException) -> RetryDecision:
        if isinstance(error, ScriptedHTTPError):
            return decide_status(error.status, error.message, error.retry_after)
        return super().classify(error)

    def concurrency_key(self) -> str:
        return f"scripted:{self.model}"
