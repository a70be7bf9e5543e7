"""Errors the model layer raises on purpose.

Callers catch `ModelError`; `ModelCallError.reason` tells a context overflow (trim the
prompt) from an auth problem (fix the key) from a provider that stayed down (mark the
rollout errored and go on).
"""

from __future__ import annotations

import re

from .types import Usage

__all__ = [
    "FINAL_REASONS",
    "MalformedReplyError",
    "MissingAPIKeyError",
    "ModelCallError",
    "ModelError",
    "RefusalError",
    "ReplayMissError",
    "ScriptError",
    "UnknownProviderError",
    "one_line",
    "status_line",
]

#: Reasons of a final failure that no re-ask, of the same call or the same question, can
#: fix: the account (auth, quota, spend limit), the model (retired or unknown), a setting
#: the model refuses, or the model's own refusal. A caller that re-asks on a bad reply
#: stops on these.
FINAL_REASONS = frozenset({"auth", "quota", "spend_limit", "model_not_found", "refusal", "content_filter",
                           "unsupported"})


class ModelError(Exception):
    """Base of every error `core.llm` raises on purpose."""


class UnknownProviderError(ModelError, ValueError):
    """A model name whose provider part is not registered."""


class MissingAPIKeyError(ModelError):
    """No API key was passed and the provider's environment variable is unset."""

    def __init__(self, model: str, variable: str) -> None:
        super().__init__(f"{model} needs an API key: set {variable} or pass api_key=...")
        self.variable = variable


class MalformedReplyError(ModelError):
    """The provider answered, but not with a usable reply (empty or malformed body)."""


class ScriptError(ModelError, AssertionError):
    """A scripted model was called more often than scripted, or left steps unused."""


class RefusalError(ModelError):
    """The model declined to answer (Claude's ``stop_reason: refusal``, OpenAI's ``refusal``
    field) or the provider's content filter stopped the reply (``finish_reason:
    content_filter``): final for the call, never a format error to re-ask."""

    def __init__(self, message: str, *, kind: str = "refusal", usage: Usage | None = None) -> None:
        super().__init__(message)
        #: "refusal" (the model's) or "content_filter" (the provider's filter).
        self.kind = kind
        #: The tokens of the refused reply: billed like any other.
        self.usage = usage


class ReplayMissError(ModelError):
    """A replayed recording holds no reply for this request."""


class ModelCallError(ModelError):
    """A model call finally failed: not retryable, or still failing after the retries.

    `reason` is the classifier's word for it: "auth", "bad_request", "context_length",
    "quota" (billing: add credit), "spend_limit" (a hard spend limit set on the account),
    "model_not_found" (retired or misspelled model), "refusal" (the model declined or a
    content filter stopped it), "length" (cut at the token limit, also with a larger one),
    "malformed", "rate_limit", "server_error", "timeout", "connection", "script",
    "replay_miss" or "error". A retryable reason means the retry budget ran out.
    """

    def __init__(self, model: str, reason: str, message: str, *, retries: int = 0,
                 status: int | None = None) -> None:
        tail = f" after {retries} retries" if retries else ""
        super().__init__(f"{model}: {message} ({reason}{tail})")
        self.model = model
        self.reason = reason
        self.retries = retries
        self.status = status


_TAG = re.compile(r"<[^>]{0,400}>")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_HTML = re.compile(r"<\s*(!doctype|html|head|body)\b", re.IGNORECASE)
#: Longest error text kept; a provider's message is rarely longer, a page always is.
MAX_MESSAGE = 300


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` as one short line: an HTML error page becomes its title (or its first words)
    and "(an HTML page)", whitespace collapses, and the rest is cut at `limit` characters."""
    page = _HTML.search(text)
    if page is not None:
        title = _TITLE.search(text)
        words = " ".join(_TAG.sub(" ", title.group(1) if title else text[page.start():]).split())
        head = " ".join(text[:page.start()].split()).rstrip(" -:")
        text = f"{head + ': ' if head else ''}{words[:120] or 'an error page'} (an HTML page)"
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def status_line(status: int, body: object, fallback: str) -> str:
    """An HTTP error of an SDK as one line: the status, the error's type or code and message
    from a JSON body, or a text body (an HTML page: its title) shortened."""
    if isinstance(body, dict):
        found = body.get("error", body)
        error = found if isinstance(found, dict) else {}
        kind = error.get("code") or error.get("type") or ""
        message = error.get("message") or ""
        if message or kind:
            return one_line(f"HTTP {status}{' ' + str(kind) if kind else ''}: {message}".rstrip(": "))
    if isinstance(body, str) and body.strip():
        return one_line(f"HTTP {status}: {body}")
    return one_line(f"HTTP {status}: {fallback}")
