"""The provider tier: adapters that speak one wire protocol each.

An adapter implements only `generate()` (one attempt, no retries) and `classify()` (what
to do about an exception it raised). `ChatModel` owns everything else. Adapters are found
by the provider part of a "provider/model" name and imported only when first used.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextvars import ContextVar
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from core.config import redact_urls

from .errors import (
    MalformedReplyError,
    MissingAPIKeyError,
    ModelError,
    RefusalError,
    ReplayMissError,
    ScriptError,
    UnknownProviderError,
)
from .profiles import Profile, UnsupportedSettingError, resolve
from .retry import RetryDecision
from .types import ChatMessage, GenerateConfig, ModelOutput

__all__ = [
    "PROVIDERS",
    "ModelAPI",
    "current_module",
    "provider_class",
    "rate_limit_headers",
    "resolve_api_key",
    "split_name",
]

#: The module tag of the call in progress, set by `ChatModel` for adapters that keep it
#: (the scripted provider records it with each request).
current_module: ContextVar[str] = ContextVar("current_module", default="")

#: Provider name -> "module:Class", imported lazily.
PROVIDERS: dict[str, str] = {
    "openai": "core.llm.providers.openai:OpenAIAPI",
    "anthropic": "core.llm.providers.anthropic:AnthropicAPI",
    "vllm": "core.llm.providers.openai_compatible:VLLMAPI",
    "gemini": "core.llm.providers.openai_compatible:GeminiAPI",
    "openrouter": "core.llm.providers.openai_compatible:OpenRouterAPI",
    "scripted": "core.llm.scripted:ScriptedAPI",
    "replay": "core.llm.replay:ReplayAPI",
    "sim": "core.llm.sim.provider:SimAPI",
}


class ModelAPI(ABC):
    """One model behind one endpoint. Subclasses set `provider` and implement `generate`."""

    provider: ClassVar[str]
    #: Concurrent requests allowed per endpoint unless the caller says otherwise.
    default_max_connections: ClassVar[int] = 32

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0) -> None:
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self._api_key = api_key

    def __repr__(self) -> str:
        shown = redact_urls(self.base_url) if self.base_url else None
        return f"{type(self).__name__}(model={self.model!r}, base_url={shown!r})"

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}"

    @property
    def profile(self) -> Profile:
        """What this model's API accepts (resolved on each use: overrides may change)."""
        return resolve(self.name)

    @abstractmethod
    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        """One attempt at a reply; raise on any failure and let `classify` judge it."""

    def classify(self, error: BaseException) -> RetryDecision:
        """Retry decision for errors every provider can meet; subclasses add their SDK's."""
        if isinstance(error, MalformedReplyError):
            return RetryDecision.transient("malformed")  # a garbled body is the wire's fault: ask again
        if isinstance(error, ScriptError):
            return RetryDecision.no("script")
        if isinstance(error, RefusalError):
            return RetryDecision.no(error.kind)
        if isinstance(error, UnsupportedSettingError):
            return RetryDecision.no("unsupported")
        if isinstance(error, ReplayMissError):
            return RetryDecision.no("replay_miss")
        if isinstance(error, (TimeoutError, asyncio.TimeoutError)):
            return RetryDecision.transient("timeout")
        if isinstance(error, (ConnectionError, EOFError)):
            return RetryDecision.transient("connection")
        return RetryDecision.no("error")

    def describe(self, error: BaseException) -> str:
        """`error` as the one line a final failure reports (subclasses shorten their SDK's)."""
        return str(error) if isinstance(error, ModelError) else f"{type(error).__name__}: {error}"

    def concurrency_key(self) -> str:
        """Calls with equal keys share one concurrency limit."""
        return f"{self.provider}:{self.base_url or ''}"

    def rate_key(self) -> str:
        """Calls with equal keys share one rate budget (`core.llm.rate_budget`): a provider limits
        an account per model."""
        return f"{self.concurrency_key()}|{self.model}"

    def announces_rate_limits(self) -> bool:
        """Whether this endpoint's answers carry rate-limit headers worth waiting for before
        a run's first calls go out (the providers' own APIs do; a server of your own may not)."""
        return False

    def rate_headers(self, error: BaseException) -> Mapping[str, str] | None:
        """The rate-limit headers of a failed attempt's response, where it had one (the
        SDKs' status errors carry their response)."""
        headers = getattr(getattr(error, "response", None), "headers", None)
        return headers if headers is not None and hasattr(headers, "items") else None

    def secrets(self) -> list[str]:
        """Strings that must never reach a log, record or error message: the key, and any
        credentials written into the base URL (``https://user:password@host``)."""
        found = [self._api_key] if self._api_key else []
        if self.base_url:
            parts = urlsplit(self.base_url)
            secret = parts.password or parts.username  # a lone user name is a token (https://TOKEN@host)
            if secret:
                found += [secret, unquote(secret)]
        return sorted(set(found), key=len, reverse=True)

    async def aclose(self) -> None:
        """Release connections; the default holds none."""
        return None


_RATE_HEADERS = ("x-ratelimit-", "anthropic-ratelimit-", "retry-after")


def rate_limit_headers(headers: object) -> dict[str, str]:
    """The rate-limit headers of a response (what the run's rate budget learns from)."""
    items = getattr(headers, "items", None)
    if items is None:
        return {}
    return {str(k).lower(): str(v) for k, v in items() if str(k).lower().startswith(_RATE_HEADERS)}


def split_name(name: str) -> tuple[str, str]:
    provider, sep, model = name.partition("/")
    if not sep or not provider or not model:
        raise UnknownProviderError(f"model names look like 'provider/model', got {name!r}")
    return provider, model


def provider_class(provider: str) -> type[ModelAPI]:
    target = PROVIDERS.get(provider)
    if target is None:
        known = ", ".join(sorted(PROVIDERS))
        raise UnknownProviderError(f"unknown model provider {provider!r}; use one of: {known}")
    module_name, _, attr = target.partition(":")
    cls: type[ModelAPI] = getattr(importlib.import_module(module_name), attr)
    return cls


def resolve_api_key(name: str, api_key: str | None, variable: str, *, required: bool = True) -> str | None:
    """The key passed in, else the environment variable's; a clear error when required and unset."""
    key = api_key or os.environ.get(variable) or None
    if key is None and required:
        raise MissingAPIKeyError(name, variable)
    return key
