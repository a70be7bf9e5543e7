"""A provider's rate limiter as the simulated models meet it, and the headers it answers with.

Both providers replenish limits continuously (a token bucket holding a minute's worth):
OpenAI counts requests and tokens (prompt and completion) per model, Anthropic requests,
uncached input tokens and output tokens. Every answer carries the provider's rate-limit
headers; a request the buckets cannot hold is refused, without being charged, with the
provider's own 429 (built by its SDK from the response, `refusal`).

- OpenAI (developers.openai.com/api/docs/guides/rate-limits): ``x-ratelimit-limit-*``,
  ``x-ratelimit-remaining-*`` and ``x-ratelimit-reset-*`` for ``requests`` and
  ``tokens``, the reset being the time until the limit is back to its initial state, as a
  duration ("1s", "6m0s", "20ms"); a refusal's body is ``{"error": {"message": "Rate limit
  reached for MODEL in organization ORG on tokens per min (TPM): Limit L, Used U, Requested
  R. Please try again in T. ...", "type": "tokens", "param": null, "code":
  "rate_limit_exceeded"}}``.
- Anthropic (docs.anthropic.com/en/api/rate-limits): ``anthropic-ratelimit-{requests,
  input-tokens,output-tokens,tokens}-{limit,remaining,reset}``, the reset an RFC 3339 time
  when the bucket is full again; a refusal adds ``retry-after`` (seconds) and its body is
  ``{"type": "error", "error": {"type": "rate_limit_error", "message": ...}}``.
"""

from __future__ import annotations

import asyncio
import json
import math
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core import clock

from .config import AccountLimits

__all__ = ["Bucket", "ProviderLimiter", "Verdict", "limiter_for"]


@dataclass
class Bucket:
    """A minute's worth of one quantity, refilled continuously."""

    capacity: float
    level: float
    updated: float

    @property
    def rate(self) -> float:
        return self.capacity / 60.0

    def refill(self, now: float) -> None:
        if now > self.updated:
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
            self.updated = now

    def until(self, amount: float) -> float:
        """Seconds until `amount` fits (0 when it does now)."""
        missing = min(amount, self.capacity) - self.level
        return max(missing / self.rate, 0.0)

    def until_full(self) -> float:
        return max((self.capacity - self.level) / self.rate, 0.0)


@dataclass(frozen=True)
class Verdict:
    """What the provider's limiter said of one request."""

    admitted: bool
    headers: dict[str, str]
    status: int = 200
    body: dict[str, Any] | None = None


def _duration(seconds: float) -> str:
    """OpenAI's reset format: "20ms", "1.5s", "6m0s"."""
    if seconds < 1.0:
        return f"{max(math.ceil(seconds * 1000), 0)}ms"
    minutes, rest = divmod(seconds, 60.0)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes >= 1 else text


def _stamp(seconds_from_now: float) -> str:
    when = datetime.fromtimestamp(clock.now() + seconds_from_now, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


class ProviderLimiter:
    """The limits of one account for one model, as the provider enforces them."""

    def __init__(self, provider: str, model: str, limits: AccountLimits) -> None:
        self.provider = provider
        self.model = model
        self.limits = limits
        now = clock.monotonic()
        axes = {"requests": limits.requests_per_minute}
        if provider == "anthropic":
            axes |= {"input-tokens": limits.input_tokens_per_minute, "output-tokens": limits.output_tokens_per_minute}
        else:
            axes |= {"tokens": limits.tokens_per_minute}
        self.buckets = {axis: Bucket(cap, cap, now) for axis, cap in axes.items() if cap is not None}
        self.admitted = 0
        self.refused = 0

    def charge(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> Verdict:
        """Admit and charge one request, or refuse it (nothing charged)."""
        now = clock.monotonic()
        cost = self._cost(input_tokens, output_tokens, cached_tokens)
        for bucket in self.buckets.values():
            bucket.refill(now)
        short = [(axis, b.until(cost[axis])) for axis, b in self.buckets.items() if b.level < cost[axis]]
        if short:
            self.refused += 1
            axis, wait = max(short, key=lambda item: item[1])
            return self._refusal(axis, wait, cost)
        for axis, bucket in self.buckets.items():
            bucket.level -= cost[axis]
        self.admitted += 1
        return Verdict(True, self._headers())

    def _cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> dict[str, float]:
        if self.provider == "anthropic":  # cache reads do not count towards input tokens per minute
            return {"requests": 1, "input-tokens": max(input_tokens - cached_tokens, 0),
                    "output-tokens": output_tokens}
        return {"requests": 1, "tokens": input_tokens + output_tokens}

    def _headers(self, exhausted: str | None = None) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.provider == "anthropic":
            for axis, b in self.buckets.items():
                remaining = 0 if axis == exhausted else int(b.level)
                headers[f"anthropic-ratelimit-{axis}-limit"] = str(int(b.capacity))
                headers[f"anthropic-ratelimit-{axis}-remaining"] = str(max(remaining, 0))
                headers[f"anthropic-ratelimit-{axis}-reset"] = _stamp(b.until_full())
            tokens = [(a, b) for a, b in self.buckets.items() if a != "requests"]
            if tokens:  # the most restrictive token limit
                axis, b = min(tokens, key=lambda item: item[1].level / item[1].capacity)
                headers["anthropic-ratelimit-tokens-limit"] = headers[f"anthropic-ratelimit-{axis}-limit"]
                headers["anthropic-ratelimit-tokens-remaining"] = headers[f"anthropic-ratelimit-{axis}-remaining"]
                headers["anthropic-ratelimit-tokens-reset"] = headers[f"anthropic-ratelimit-{axis}-reset"]
            return headers
        for axis, b in self.buckets.items():
            remaining = 0 if axis == exhausted else int(b.level)
            headers[f"x-ratelimit-limit-{axis}"] = str(int(b.capacity))
            headers[f"x-ratelimit-remaining-{axis}"] = str(max(remaining, 0))
            headers[f"x-ratelimit-reset-{axis}"] = _duration(b.until_full())
        return headers

    def _refusal(self, axis: str, wait: float, cost: dict[str, float]) -> Verdict:
        bucket = self.buckets[axis]
        headers = self._headers(exhausted=axis)
        if self.provider == "anthropic":
            per = {"requests": "requests", "input-tokens": "input tokens", "output-tokens": "output tokens"}[axis]
            headers["retry-after"] = str(max(math.ceil(wait), 1))
            body = {"type": "error", "error": {"type": "rate_limit_error", "message": (
                f"This request would exceed the rate limit for your organization (sim-org) of "
                f"{int(bucket.capacity):,} {per} per minute. For details, refer to: "
                "https://docs.claude.com/en/api/rate-limits. You can see the response headers for current "
                "usage. Please reduce the prompt length or the maximum tokens requested, or try again later.")}}
            return Verdict(False, headers, 429, body)
        kind = "requests per min (RPM)" if axis == "requests" else "tokens per min (TPM)"
        used = int(bucket.capacity - max(bucket.level, 0))
        body = {"error": {"message": (
            f"Rate limit reached for {self.model} in organization org-sim on {kind}: Limit "
            f"{int(bucket.capacity)}, Used {used}, Requested {int(cost[axis])}. Please try again in "
            f"{_duration(wait)}. Visit https://platform.openai.com/account/rate-limits to learn more."),
            "type": axis, "param": None, "code": "rate_limit_exceeded"}}
        return Verdict(False, headers, 429, body)


def body_bytes(verdict: Verdict) -> bytes:
    return json.dumps(verdict.body or {}).encode()


_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], ProviderLimiter]] = (
    weakref.WeakKeyDictionary())


def limiter_for(provider: str, model: str, limits: AccountLimits) -> ProviderLimiter:
    """The account's limiter for `model`, shared by every simulated model on this event loop
    (a provider limits an account, whichever process or role sends the request)."""
    per_loop = _LIMITERS.setdefault(asyncio.get_running_loop(), {})
    key = (provider, model)
    found = per_loop.get(key)
    if found is None:
        found = per_loop[key] = ProviderLimiter(provider, model, limits)
    return found
