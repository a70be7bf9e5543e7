"""`ChatModel`: the one model class every room calls.

It owns what adapters must not repeat: retries with backoff (decided by the adapter's
classifier), a concurrency limit per endpoint, per-attempt timeouts, the ledger entry of
every call, recording, and keeping secrets out of errors. Adapters only `generate()`.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
import weakref
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from core import clock

from . import rate_budget
from .errors import ModelCallError, ModelError, RefusalError, ScriptError, one_line
from .ledger import Ledger
from .limits import default_max_tokens
from .notices import RetryNotice, notify
from .prices import PriceTable
from .provider import ModelAPI, current_module, provider_class, split_name
from .recorder import Recorder
from .records import CallRecord
from .retry import RetryDecision, RetryPolicy
from .structured import ReplyFormat
from .types import ChatMessage, GenerateConfig, ModelOutput, Usage

__all__ = ["ChatModel", "TruncatedReplyError"]


class TruncatedReplyError(ModelError):
    """The reply was cut by the token limit (finish_reason "length", Claude's "max_tokens"),
    also when asked once more with a larger limit: not a format error of the model."""

@dataclass
class _Meter:
    """What one call spent waiting on the provider's rate limits (for its ledger record)."""

    paced: float = 0.0
    refusals: int = 0
    refused: float = 0.0
    refused_at: float | None = None


_METER: ContextVar[_Meter | None] = ContextVar("_METER", default=None)

_Slots = dict[tuple[str, int], asyncio.Semaphore]
_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Slots] = weakref.WeakKeyDictionary()


def _slot(key: str, limit: int) -> asyncio.Semaphore:
    """The semaphore shared by every model on this loop with the same endpoint and limit."""
    per_loop = _SLOTS.setdefault(asyncio.get_running_loop(), {})
    return per_loop.setdefault((key, limit), asyncio.Semaphore(limit))


class ChatModel:
    """An async chat model named "provider/model"."""

    def __init__(self, api: ModelAPI, *, ledger: Ledger | None = None, prices: PriceTable | None = None,
                 recorder: Recorder | None = None, tags: dict[str, str] | None = None,
                 retry: RetryPolicy | None = None, max_connections: int | None = None,
                 timeout: float | None = None, config: GenerateConfig | None = None) -> None:
        self.api = api
        self.ledger = ledger
        self.prices = prices if prices is not None else PriceTable()
        self.recorder = recorder
        self.tags = {str(k): str(v) for k, v in (tags or {}).items()}
        self.retry = retry if retry is not None else RetryPolicy()
        self.max_connections = max_connections or api.default_max_connections
        self.timeout = timeout if timeout is not None else api.timeout
        self.config = config or GenerateConfig()

    @classmethod
    def from_name(cls, name: str, *, ledger: Ledger | None = None, base_url: str | None = None,
                  api_key: str | None = None, prices: PriceTable | None = None,
                  recorder: Recorder | None = None, tags: dict[str, str] | None = None,
                  retry: RetryPolicy | None = None, max_connections: int | None = None,
                  timeout: float = 600.0, config: GenerateConfig | None = None) -> ChatModel:
        """Build the adapter for `name` ("openai/gpt-4o", "scripted/s", "replay/run.jsonl").

        `timeout` bounds each attempt (reasoning models may think for minutes); `max_connections` overrides the provider's default
        concurrency limit; `config` holds defaults that each call's config overrides.
        """
        provider, model = split_name(name)
        api = provider_class(provider)(model, base_url=base_url, api_key=api_key, timeout=timeout)
        return cls(api, ledger=ledger, prices=prices, recorder=recorder, tags=tags, retry=retry,
                   max_connections=max_connections, timeout=timeout, config=config)

    @property
    def name(self) -> str:
        return self.api.name

    def reply_config(self, config: GenerateConfig | None, contract: type[BaseModel]) -> GenerateConfig:
        """`config` asking for replies in `contract`'s schema where this model's provider
        enforces one (native structured outputs); unchanged (free text) elsewhere."""
        base = config or GenerateConfig()
        if not self.structured_outputs:
            return base
        return base.model_copy(update={"reply_format": ReplyFormat.of(contract)})

    @property
    def structured_outputs(self) -> bool:
        """Whether a `reply_format` reaches this model as a schema its provider enforces
        (else the caller's prompt and parser carry the contract as free text)."""
        return self.api.profile.structured != "none"

    def __repr__(self) -> str:
        return f"ChatModel({self.name!r}, tags={self.tags!r})"

    def with_tags(self, **tags: Any) -> ChatModel:
        """A copy sharing adapter, ledger and recorder, whose records carry these tags too."""
        clone = copy.copy(self)
        clone.tags = {**self.tags, **{k: str(v) for k, v in tags.items()}}
        return clone

    async def aclose(self) -> None:
        """Close the adapter's connections (shared with copies made by `with_tags`)."""
        await self.api.aclose()

    async def generate(self, messages: list[ChatMessage], *, module: str,
                       config: GenerateConfig | None = None) -> ModelOutput:
        """One reply, retried as the adapter's classifier allows; one ledger record either way.

        Raises `ModelCallError` when the call finally fails (and `ScriptError` unchanged,
        so a scripted test cannot swallow it).
        """
        if not messages:
            raise ValueError("generate() needs at least one message")
        merged = self.config.merged(config)
        started, begun = clock.now(), clock.monotonic()
        attempts = 0
        spent: list[Usage] = []  # every reply received, cut ones included: all are billed
        token = current_module.set(module)
        meter = _Meter()
        metering = _METER.set(meter)

        sent = self.limited(merged, module)

        async def attempt() -> ModelOutput:
            nonlocal attempts
            attempts += 1
            return await self._attempt(messages, sent, spent)

        call = uuid.uuid4().hex
        last: list[RetryDecision] = []

        def retrying(number: int, decision: RetryDecision, error: BaseException, spent_s: float, wait: float) -> None:
            last[:] = [decision]
            notify(RetryNotice("retry", call, self.name, module, decision.reason, number, spent_s, wait,
                               decision.status, self._clean(one_line(self.api.describe(error), 160)),
                               tags=dict(self.tags)))

        def finished(succeeded: bool) -> None:
            if last:
                notify(RetryNotice("done", call, self.name, module, last[0].reason, attempts,
                                   clock.monotonic() - begun, status=last[0].status, succeeded=succeeded,
                                   tags=dict(self.tags)))

        try:
            output = await self.retry.run(attempt, self._classify, retrying)
        except ScriptError as exc:
            self._log(module, started, begun, spent, attempts - 1, self._clean(str(exc)), "script", meter)
            raise
        except Exception as exc:
            decision = self._classify(exc)
            described = decision.advice or one_line(self.api.describe(exc))  # one line the user can act on
            notes = "; ".join(getattr(exc, "__notes__", ()))
            message = self._clean(f"{described} ({notes})" if notes else described)
            self._log(module, started, begun, spent, attempts - 1, message, decision.reason, meter)
            finished(False)
            raise ModelCallError(self.name, decision.reason, message, retries=attempts - 1,
                                 status=decision.status) from exc
        finally:
            current_module.reset(token)
            _METER.reset(metering)
        finished(True)
        self._log(module, started, begun, spent, attempts - 1, None, None, meter)
        if self.recorder is not None:
            self.recorder.record(model=self.name, module=module, messages=list(messages),
                                 config=merged, output=output)
        return output

    async def _attempt(self, messages: list[ChatMessage], config: GenerateConfig,
                       spent: list[Usage]) -> ModelOutput:
        """One reply; one cut at the token limit is asked once more with a larger limit
        (reasoning models spend the limit on thinking and answer nothing), its tokens added.
        Each reply's usage goes to `spent` as it arrives, so the ledger bills cut and refused
        replies also when the call ends in an error."""
        output = await self._billed(messages, config, spent)
        if output.finish_reason != "length":
            return output
        limit = config.max_tokens
        larger = self._larger_limit(config)
        if larger is None:
            raise TruncatedReplyError(f"the reply was cut at the token limit ({limit or 'the model default'}, "
                                      "the model's output cap); lower reasoning_effort or shorten the task")
        second = await self._billed(messages, config.model_copy(update={"max_tokens": larger}), spent)
        if second.finish_reason == "length":
            raise TruncatedReplyError(f"the reply was cut at the token limit ({limit}, then {larger}); "
                                      "raise max_tokens or lower reasoning_effort")
        return second.model_copy(update={"usage": _added(output.usage, second.usage)})

    async def _billed(self, messages: list[ChatMessage], config: GenerateConfig, spent: list[Usage]) -> ModelOutput:
        try:
            output = await self._once(messages, config)
        except RefusalError as exc:
            if exc.usage is not None:
                spent.append(exc.usage)  # a refused reply is billed too
            raise
        spent.append(output.usage)
        return output

    def _larger_limit(self, config: GenerateConfig) -> int | None:
        """Twice the token limit, within the model's output cap; None when none is larger."""
        limit = config.max_tokens
        if limit is None:
            return None
        cap = self.api.profile.max_output
        larger = min(limit * 2, cap) if cap is not None else limit * 2
        return larger if larger > limit else None

    def limited(self, config: GenerateConfig, module: str) -> GenerateConfig:
        """`config` with the output limit this call sends: the configured one, else the
        role's default with room for the model's reasoning (`core.llm.limits`)."""
        if config.max_tokens is not None:
            return config
        limit = default_max_tokens(self.api.profile, module, config.reasoning_effort)
        return config if limit is None else config.model_copy(update={"max_tokens": limit})

    async def _once(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        meter = _METER.get()
        budget = rate_budget.budget_for(self.api.rate_key(), probe=self.api.announces_rate_limits())  # shared by the run
        ticket = await budget.admit(current_module.get(), messages, config)
        if meter is not None:
            meter.paced += ticket.held
            if meter.refused_at is not None:  # the time since the refused attempt began is lost
                meter.refused += clock.monotonic() - meter.refused_at
                meter.refused_at = None
        began = clock.monotonic()
        try:
            async with _slot(self.api.concurrency_key(), self.max_connections):
                async with asyncio.timeout(self.timeout):
                    output = await self.api.generate(list(messages), config)
        except BaseException as exc:  # cancelled too: the budget must hear of every attempt
            refused = isinstance(exc, Exception) and self._classify(exc).kind == "rate_limit"
            budget.failed(ticket, self.api.rate_headers(exc), refused=refused)
            if refused and meter is not None:
                meter.refusals += 1
                meter.refused_at = began
            raise
        if not isinstance(output, ModelOutput):
            raise TypeError(f"{type(self.api).__name__}.generate returned {type(output).__name__}")
        budget.answered(ticket, output.usage, output.rate_headers)
        return output

    def _classify(self, error: BaseException) -> RetryDecision:
        if isinstance(error, TruncatedReplyError):
            return RetryDecision.no("length")
        return self.api.classify(error)

    def _clean(self, text: str) -> str:
        for secret in self.api.secrets():
            text = text.replace(secret, "***")
        return text

    def _log(self, module: str, started: float, begun: float, spent: list[Usage], retries: int,
             error: str | None, kind: str | None = None, meter: _Meter | None = None) -> None:
        """One record of the call: the tokens of every reply it received, each priced on its
        own (a long-prompt tier applies per request, not to their sum)."""
        if self.ledger is None:
            return
        usage = _total(spent)
        self.ledger.append(CallRecord(
            id=uuid.uuid4().hex,
            module=module,
            model=self.name,
            tags=dict(self.tags),
            started_at=started,
            seconds=clock.monotonic() - begun,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            dollars=sum(self.prices.cost(self.name, each) for each in spent),
            retries=max(retries, 0),
            error=error,
            error_kind=kind if error is not None else None,
            **_waits(meter),
        ))


def _waits(meter: _Meter | None) -> dict[str, Any]:
    """The rate-limit fields of a ledger record (absent when the call never waited)."""
    if meter is None:
        return {}
    refused = meter.refused + (clock.monotonic() - meter.refused_at if meter.refused_at is not None else 0.0)
    return {"paced_seconds": round(meter.paced, 6), "refusals": meter.refusals, "refused_seconds": round(refused, 6)}


def _total(usages: list[Usage]) -> Usage:
    total = Usage()
    for usage in usages:
        total = _added(total, usage)
    return total


def _added(a: Usage, b: Usage) -> Usage:
    return Usage(input_tokens=a.input_tokens + b.input_tokens, output_tokens=a.output_tokens + b.output_tokens,
                 cached_tokens=a.cached_tokens + b.cached_tokens,
                 cache_write_tokens=a.cache_write_tokens + b.cache_write_tokens,
                 estimated=a.estimated or b.estimated)
