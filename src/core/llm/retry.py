"""Retry decisions, waits, and the retry loop of one model call.

Each provider's classifier turns an exception into a `RetryDecision`; `RetryPolicy.run`
(tenacity's loop, with the project's classifier and waits) retries while the decision allows and the call's total budget (default ten minutes, long
enough to ride out a real rate-limit window) is not spent. A rate-limited attempt waits at
least what the server asked for: `retry-after-ms`, `Retry-After` (seconds or an HTTP date),
OpenAI's `x-ratelimit-reset-requests` / `-tokens` durations ("1s", "6m0s", "20ms") or
Anthropic's `anthropic-ratelimit-*-reset` times. Auth errors, bad requests, context
overflows, an exhausted quota or credit balance, a hard spend limit, and a model the
provider does not serve are final, the last three with advice on what to do.

Sources of the rules below (as published by the providers):
- OpenAI error codes (429 `insufficient_quota` vs rate limits, 404 `model_not_found`) and
  rate-limit headers: platform.openai.com/docs/guides/error-codes, .../guides/rate-limits.
- Anthropic error types (`not_found_error`, `rate_limit_error`, `overloaded_error`,
  `billing_error`; "credit balance is too low" as a 400) and `retry-after` /
  `anthropic-ratelimit-*-reset` headers: docs.anthropic.com/en/api/errors, .../api/rate-limits.
- Spend limits: OpenAI answers 429 with code `organization_spend_limit_exceeded` or
  `project_spend_limit_exceeded` (developers.openai.com/api/docs/guides/spend-limits), and
  `organization_usage_limit_exceeded` / `credit_balance_exhausted` for its own usage limit
  and prepaid credit (help.openai.com "Troubleshooting API usage and spend limits"; none is
  cured by retrying); Anthropic answers 429 `rate_limit_error` with
  `details.error_code` `enforced_spend_limit_reached` or `contract_spend_limit_reached`
  (402 `linked_organization_spend_limit_reached`), which anthropic SDK 2.14 raises as
  `EnforcedSpendLimitReachedError` and siblings (`anthropic/_error_classes.py`).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from tenacity import AsyncRetrying, RetryCallState

from core import clock as run_clock

__all__ = [
    "BACKOFF_SCALE_ENV",
    "SPEND_LIMIT_CODES",
    "RetryDecision",
    "RetryPolicy",
    "decide_status",
    "parse_duration",
    "parse_retry_after",
]

#: Multiplies every exponential backoff; the test suite sets it to 0.
BACKOFF_SCALE_ENV = "AGENT_S3_LLM_BACKOFF_SCALE"

T = TypeVar("T")


@dataclass(frozen=True)
class RetryDecision:
    """What to do about one failed attempt."""

    kind: Literal["no", "transient", "rate_limit"]
    #: Short word for the cause: auth, bad_request, context_length, quota, model_not_found,
    #: malformed, timeout, ...
    reason: str
    #: Seconds the server asked us to wait (Retry-After or a rate-limit reset), if it said.
    retry_after: float | None = None
    #: HTTP status, when there was one.
    status: int | None = None
    #: For a final error the user must act on: what happened and what to do, in one line.
    advice: str | None = None

    @property
    def retry(self) -> bool:
        return self.kind != "no"

    @classmethod
    def no(cls, reason: str, status: int | None = None, advice: str | None = None) -> RetryDecision:
        return cls("no", reason, None, status, advice)

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
    """Exponential backoff with jitter inside a total budget per call; a server's requested
    wait is a floor. `sleep` and `clock` are injectable so tests compress time."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    #: Seconds one call may spend in total (attempts and waits) before it fails; rides out
    #: rate-limit windows of several minutes.
    budget: float = Field(default=600.0, gt=0)
    #: Attempts in total, the first included (a bound for errors that come back at once).
    max_attempts: int = Field(default=30, ge=1)
    initial_backoff: float = 1.0
    max_backoff: float = 60.0
    #: Up to this many seconds of random jitter are added to each backoff.
    jitter: float = 1.0
    #: 0 zeroes the exponential backoff (a server's requested wait still holds); read from
    #: the environment variable AGENT_S3_LLM_BACKOFF_SCALE when not given.
    backoff_scale: float = Field(default_factory=_default_scale)
    sleep: Callable[[float], Awaitable[None]] = Field(default=asyncio.sleep, exclude=True, repr=False)
    clock: Callable[[], float] = Field(default=run_clock.monotonic, exclude=True, repr=False)

    def wait(self, attempt: int, decision: RetryDecision) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        backoff = min(self.initial_backoff * 2 ** (attempt - 1), self.max_backoff)
        backoff = (backoff + random.uniform(0, self.jitter)) * self.backoff_scale
        if decision.retry_after is not None:
            return max(backoff, decision.retry_after)
        return backoff

    async def run(self, attempt: Callable[[], Awaitable[T]],
                  classify: Callable[[BaseException], RetryDecision],
                  on_retry: Callable[[int, RetryDecision, BaseException, float, float], None] | None = None) -> T:
        """`attempt()` until it succeeds, a failure is final, or the budget or attempts run
        out; then the last exception is raised, with a note saying why retrying stopped.
        `on_retry(attempt, decision, error, seconds so far, wait)` hears of each retry before
        its wait.

        The loop is tenacity's: `classify` decides whether a failure is retried, `wait` how
        long to pause (the server's requested wait a floor), and the call stops when the
        attempts or the budget (the pause included) would be exceeded."""
        start = self.clock()
        decided: dict[int, RetryDecision] = {}

        def retryable(state: RetryCallState) -> bool:
            error = state.outcome.exception() if state.outcome is not None else None
            if not isinstance(error, Exception):  # a success, or a cancellation or exit
                return False
            decided[state.attempt_number] = decision = classify(error)
            return decision.retry

        def pause(state: RetryCallState) -> float:
            return self.wait(state.attempt_number, decided[state.attempt_number])

        def give_up(state: RetryCallState) -> bool:
            number, error = state.attempt_number, _failure(state)
            if number >= self.max_attempts:
                error.add_note(f"gave up after {number} attempts")
                return True
            spent = self.clock() - start
            if spent + state.upcoming_sleep > self.budget:
                retry_after = decided[number].retry_after
                asked = (f"; the server asked to wait {retry_after:.0f} s"
                         if retry_after is not None and spent + retry_after > self.budget else "")
                error.add_note(f"gave up after {number} attempts in {spent:.0f} s: the call's retry "
                               f"budget is {self.budget:.0f} s{asked}")
                return True
            return False

        def tell(state: RetryCallState) -> None:
            if on_retry is not None:
                number = state.attempt_number
                on_retry(number, decided[number], _failure(state), self.clock() - start, state.upcoming_sleep)

        retrying = AsyncRetrying(retry=retryable, wait=pause, stop=give_up, before_sleep=tell,
                                 sleep=self.sleep, reraise=True)
        return await retrying(attempt)


def _failure(state: RetryCallState) -> BaseException:
    """The exception of the attempt `state` describes (only failed attempts are asked about)."""
    error = state.outcome.exception() if state.outcome is not None else None
    assert error is not None
    return error


def parse_duration(text: str) -> float | None:
    """Seconds of a Go-style duration as OpenAI's reset headers give it ("1s", "6m0s",
    "20ms", "1h2m3.5s", "0.5s"); None when it is not one."""
    text = text.strip()
    if not text:
        return None
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(number) * scale[unit] for number, unit in parts)


def _reset_in(get: Callable[[str], str | None], header: Callable[[str, str], str], kinds: tuple[str, ...],
              parse: Callable[[str], float | None]) -> float | None:
    """The reset of an exhausted limit (remaining 0), else the longest reset given."""
    resets: dict[str, float] = {}
    for kind in kinds:
        raw = get(header(kind, "reset"))
        value = parse(raw) if raw else None
        if value is not None:
            resets[kind] = value
    if not resets:
        return None
    exhausted = [v for k, v in resets.items() if (get(header(k, "remaining")) or "").strip() == "0"]
    return max(exhausted or resets.values())


def _until(stamp: str) -> float | None:
    """Seconds until an RFC 3339 time (Anthropic's reset headers)."""
    try:
        when = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(when.timestamp() - run_clock.now(), 0.0) if when.tzinfo else None


def parse_retry_after(headers: object) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, `Retry-After` as seconds or an
    HTTP date, else OpenAI's `x-ratelimit-reset-*` durations or Anthropic's
    `anthropic-ratelimit-*-reset` times (of the exhausted limit, else the longest)."""
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
    if value:
        try:
            return max(float(value), 0.0)
        except ValueError:
            pass
        try:
            return max(parsedate_to_datetime(value).timestamp() - run_clock.now(), 0.0)
        except (TypeError, ValueError):
            pass
    openai_reset = _reset_in(get, lambda kind, what: f"x-ratelimit-{what}-{kind}", ("requests", "tokens"),
                             parse_duration)
    if openai_reset is not None:
        return openai_reset
    return _reset_in(get, lambda kind, what: f"anthropic-ratelimit-{kind}-{what}",
                     ("requests", "tokens", "input-tokens", "output-tokens"), _until)


_CONTEXT_HINTS = (
    "context_length",
    "context length",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)

#: Billing refusals: OpenAI's 429 `insufficient_quota`, Anthropic's `billing_error` and its
#: 400 "Your credit balance is too low to access the Anthropic API".
_QUOTA_HINTS = ("insufficient_quota", "billing_error", "credit balance is too low", "exceeded your current quota",
                "credit_balance_exhausted", "organization_usage_limit_exceeded")
#: Hard spend limits the account holder set (OpenAI organization and project limits;
#: Anthropic's enforced, contract and linked-organization limits): retrying cannot help.
SPEND_LIMIT_CODES = ("organization_spend_limit_exceeded", "project_spend_limit_exceeded",
                     "enforced_spend_limit_reached", "contract_spend_limit_reached",
                     "linked_organization_spend_limit_reached")
#: A model the provider does not serve: OpenAI's 404 `model_not_found` ("The model `x` does
#: not exist or you do not have access to it"), Anthropic's 404 `not_found_error` ("model: x");
#: a 404 that names no model (a wrong base URL) stays a bad request.
_MODEL_HINTS = ("model_not_found", "model:", "the model")

QUOTA_ADVICE = ("the account has no quota or credit left (a billing refusal, not a rate limit): "
                "add credit or raise the spending limit with the provider, then run again")
SPEND_ADVICE = ("the account reached a spend limit (a hard limit set on the organization, project or "
                "contract, not a rate limit): raise or remove it in the provider's console, or wait for "
                "the monthly reset, then run again")
MODEL_ADVICE = ("the provider does not serve this model (retired, misspelled, or not enabled for "
                "this key): name a current model in the configuration (`agent-s3 models check` "
                "shows what a run would use)")


def decide_status(status: int, message: str = "", retry_after: float | None = None) -> RetryDecision:
    """The shared reading of an HTTP error status, for providers that speak HTTP. `message`
    holds the error's text together with its code and type, where the protocol has them."""
    lowered = message.lower()
    if any(code in lowered for code in SPEND_LIMIT_CODES) and status in (400, 402, 403, 429):
        return RetryDecision.no("spend_limit", status, SPEND_ADVICE)
    if any(hint in lowered for hint in _QUOTA_HINTS) and status in (400, 402, 403, 429):
        return RetryDecision.no("quota", status, QUOTA_ADVICE)
    if status == 429:
        return RetryDecision.rate_limit(retry_after, status)
    if status in (408, 409) or status >= 500:
        return RetryDecision.transient("server_error" if status >= 500 else "timeout", status, retry_after)
    if status in (401, 403):
        return RetryDecision.no("auth", status)
    if status == 404 and any(hint in lowered for hint in _MODEL_HINTS):
        return RetryDecision.no("model_not_found", status, MODEL_ADVICE)
    if any(hint in lowered for hint in _CONTEXT_HINTS) or status == 413:
        return RetryDecision.no("context_length", status)
    return RetryDecision.no("bad_request", status)
