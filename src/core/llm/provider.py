"""The provider tier: adapters that speak one wire protocol each.

An adapter implements only `generate()` (one attempt, no retries) and `classify()` (what
to do about an exception it raised). `ChatModel` owns everything else. Adapters are found
by the provider part of a "provider/model" name in `PROVIDERS` and imported only when first
used; a provider of your own is a dotted path in that part (``my_pkg.api:MyAPI/model-x``), a
`ModelAPI` subclass registered under its ``provider`` on first use.
"""

from __future__ import annotations

import asyncio
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from core.config import redact_urls
from core.registry import Registry, UnknownName

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
    "BUILT_IN_PROVIDERS",
    "PROVIDERS",
    "SCRIPTED_PROVIDERS",
    "ModelAPI",
    "current_module",
    "is_scripted",
    "provider_class",
    "rate_limit_headers",
    "resolve_api_key",
    "split_name",
]

#: The module tag of the call in progress, set by `ChatModel` for adapters that keep it
#: (the scripted provider records it with each request).
current_module: ContextVar[str] = ContextVar("current_module", default="")

#: The built-in providers: name -> "module:Class", imported lazily.
BUILT_IN_PROVIDERS: dict[str, str] = {
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


#: Providers whose replies come from a script or a recording, never from a model.
SCRIPTED_PROVIDERS = frozenset({"scripted", "replay"})


def is_scripted(model: str | None, label: str | None = None) -> bool:
    """Whether the replies of `model` (``provider/model``) come from a script or a recording
    rather than a model, or the run's `label` says they were scripted: the one test behind
    every SCRIPTED mark and every refusal to let scripted replies stand in as a judge."""
    if label and "scripted" in label.lower():
        return True
    return bool(model) and str(model).partition("/")[0] in SCRIPTED_PROVIDERS and "/" in str(model)


def split_name(name: str) -> tuple[str, str]:
    provider, sep, model = name.partition("/")
    if not sep or not provider or not model:
        raise UnknownProviderError(f"model names look like 'provider/model', got {name!r}")
    return provider, model


def _problem(found: Any) -> str | None:
    if not (isinstance(found, type) and issubclass(found, ModelAPI) and isinstance(getattr(found, "provider", None), str)):
        return "not a model provider: a subclass of core.llm.provider.ModelAPI with a provider name"
    return None


#: Provider name -> its `ModelAPI` class; the provider part of every model name.
PROVIDERS: Registry[type[ModelAPI]] = Registry("model provider", check=_problem, name_of=lambda cls: cls.provider)
for _name, _target in BUILT_IN_PROVIDERS.items():
    PROVIDERS.register(_name, _target)


def provider_class(provider: str) -> type[ModelAPI]:
    """The adapter class of `provider` (a registered name or a dotted path);
    `UnknownProviderError` naming the providers there are."""
    try:
        return PROVIDERS.get(provider)
    except UnknownName as e:
        raise UnknownProviderError(str(e)) from None


def resolve_api_key(name: str, api_key: str | None, variable: str, *, required: bool = True) -> str | None:
    """The key passed in, else the environment variable's; a clear error when required and unset."""
    key = api_key or os.environ.get(variable) or None
    if key is None and required:
        raise MissingAPIKeyError(name, variable)
    return key
