"""Retry decisions and backoff.

Each provider's classifier turns an exception into a `RetryDecision` value; `RetryPolicy`
turns the sequence of decisions into waits. Auth errors, bad requests and context
overflows are never retried; rate limits wait at least the server's Retry-After.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Literal

from pydantic import BaseModel, Field

__all__ = [
    "BACKOFF_SCALE_ENV",
    "RetryDecision",
    "RetryPolicy",
    "decide_status",
    "parse_retry_after",
]

#: Multiplies every exponential backoff; the test suite sets it to 0.
BACKOFF_SCALE_ENV = "AGENT_S3_LLM_BACKOFF_SCALE"


@dataclass(frozen=True)
class RetryDecision:
    """What to do about one failed attempt."""

    kind: Literal["no", "transient", "rate_limit"]
    #: Short word for the cause: auth, bad_request, context_length, malformed, timeout, ...
    reason: str
    #: Seconds the server asked us to wait (Retry-After), if it said.
    retry_after: float | None = None
    #: HTTP status, when there was one.
    status: int | None = None

    @property
    def retry(self) -> bool:
        return self.kind != "no"

    @classmethod
    def no(cls, reason: str, status: int | None = None) -> RetryDecision:
        return cls("no", reason, None, status)

    @classmethod
    def transient(cls, reason: str, status: int | None = None,
                  retry_after: float | None = None) -> RetryDecision:
        return cls("transient", reason, retry_after, status)

    @classmethod
    def rate_limit(cls, retry_after: float | None = None, status: int | None = 429) -> RetryDecision:
        return cls("rate_limit", "rate_limit", retry_after, status)


def _default_scale() -> float:
    return float(os.environ.get(BACKOFF_SCALE_ENV, "1"))


class RetryPolicy(BaseModel):
    """Exponential backoff with jitter; Retry-After is a floor, capped by `max_retry_after`."""

    #: Attempts in total, the first included.
    max_attempts: int = 6
    initial_backoff: float = 1.0
    max_backoff: float = 60.0
    #: Up to this many seconds of random jitter are added to each backoff.
    jitter: float = 1.0
    #: Longest Retry-After we honour; longer requests wait this long.
    max_retry_after: float = 120.0
    #: 0 zeroes the exponential backoff (Retry-After still holds); read from the
    #: environment variable AGENT_S3_LLM_BACKOFF_SCALE when not given.
    backoff_scale: float = Field(default_factory=_default_scale)

    def wait(self, attempt: int, decision: RetryDecision) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        backoff = min(self.initial_backoff * 2 ** (attempt - 1), self.max_backoff)
        backoff = (backoff + random.uniform(0, self.jitter)) * self.backoff_scale
        if decision.retry_after is not None:
            return max(backoff, min(decision.retry_after, self.max_retry_after))
        return backoff


def parse_retry_after(headers: object) -> float | None:
    """Seconds from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    millis = get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


_CONTEXT_HINTS = (
    "context_length",
    "context length",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)


def decide_status(status: int, message: str = "", retry_after: float | None = None) -> RetryDecision:
    """The shared reading of an HTTP error status, for providers that speak HTTP."""
    lowered = message.lower()
    if status == 429:
        return RetryDecision.rate_limit(retry_after, status)
    if status in (408, 409) or status >= 500:
        return RetryDecision.transient("server_error" if status >= 500 else "timeout", status, retry_after)
    if status in (401, 403):
        return RetryDecision.no("auth", status)
    if any(hint in lowered for hint in _CONTEXT_HINTS) or status == 413:
        return RetryDecision.no("context_length", status)
    return RetryDecision.no("bad_request", status)
