"""A strict scripted model, registered as provider `scripted/<name>`.

`Script("s", [Reply(text="hi"), Reply(error=429), lambda req: "dynamic"])` registers a
script; `ChatModel.from_name("scripted/s")` plays its steps in order. A call beyond the
last step raises `ScriptError` (and is remembered, so `assert_done()` fails too); unused
steps make `assert_done()` fail; every request is kept in `script.requests`. The same
scripts drive the local HTTP servers of `core.llm.fakeserver`, which turn `error` and
`fault` into real HTTP faults.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from .errors import MalformedReplyError, ScriptError
from .provider import ModelAPI, current_module
from .retry import RetryDecision, decide_status, parse_retry_after
from .types import ChatMessage, GenerateConfig, ImagePart, ModelOutput, Usage

__all__ = [
    "Reply",
    "Script",
    "ScriptRequest",
    "ScriptedAPI",
    "ScriptedHTTPError",
    "estimate_usage",
]

#: Tokens an image is assumed to cost in the scripted estimate.
IMAGE_TOKENS_ESTIMATE = 85


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
    #: HTTP-level fault: drop the connection, or answer a malformed / empty body.
    fault: Literal["drop", "malformed", "empty"] | None = None
    #: Usage to report instead of the estimate (e.g. to report cached tokens).
    usage: Usage | None = None
    finish_reason: str = "stop"


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


def estimate_usage(messages: list[ChatMessage], text: str) -> Usage:
    """A deterministic estimate (about 4 characters a token, a flat cost per image), so
    ledgers of scripted runs have figures; it is not any tokenizer's count."""
    prompt = 0
    for message in messages:
        prompt += 4
        for part in message.parts():
            if isinstance(part, ImagePart):
                prompt += IMAGE_TOKENS_ESTIMATE
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
        usage = reply.usage or estimate_usage(messages, reply.text)
        return ModelOutput(text=reply.text, model=self.model, usage=usage,
                           finish_reason=reply.finish_reason)

    def classify(self, error: BaseException) -> RetryDecision:
        if isinstance(error, ScriptedHTTPError):
            return decide_status(error.status, error.message, error.retry_after)
        return super().classify(error)

    def concurrency_key(self) -> str:
        return f"scripted:{self.model}"
