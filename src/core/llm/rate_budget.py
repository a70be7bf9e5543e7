"""Rate limits as one budget shared by every call of a run, paced before the provider refuses.

A provider limits an account per model: requests and tokens per minute, replenished
continuously. A wide or bench run sends the same model's calls from every rollout's
policy, grounding, reflection and coding agent, from the narrators, the judges, the guides
and the critics; at 160 environments, retrying each refused call on its own (waiting the
reset the provider names, then trying again with everyone else) spends minutes refused.
Instead every call of one (endpoint, model) on an event loop draws from one `RateBudget`:

- it **learns** the limits from the rate-limit headers of every answer (OpenAI's
  ``x-ratelimit-limit/remaining-*``, Anthropic's ``anthropic-ratelimit-*``) and of every
  refusal. On an endpoint that announces its limits (the providers' own APIs) the first
  call of a budget goes alone and the others wait for its answer, so a run that starts
  hundreds of calls at once does not send them blind; elsewhere calls go out unpaced until
  an answer carries the headers, and a server whose answers never do is never paced;
- it **paces**: it keeps the account's buckets itself (a minute's worth, refilled
  continuously), charges each call its expected tokens before sending it (learned per
  module from the usage of earlier answers), corrects by the tokens actually used, and
  holds a call until the buckets can take it, instead of letting the provider refuse it;
  a refusal anyway (another client on the account) empties the bucket it names;
- it gives **priority**: held calls leave in order of their module's rank, then of
  arrival, so judging a finished task (and narrating finished steps) is not starved by the
  policy calls of rollouts that are still starting (`PRIORITY`).

`configure(pacing=False)` turns pacing off for the loop (calls go out at once and a
refused one is retried as the provider asks: the blind behaviour); the budget still
counts. `ChatModel` holds the hooks (`budget_for`, `Ticket`); each call's ledger record
says how long it was held (`paced_seconds`) and how often and how long it was refused.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from core import clock

from .image_tokens import image_tokens
from .retry import parse_duration
from .types import ChatMessage, GenerateConfig, ImagePart, Usage

__all__ = ["PRIORITY", "BudgetStats", "RateBudget", "Ticket", "budget_for", "budgets", "configure"]

#: Rank of each module's calls when they wait (lower leaves first): judging a finished task,
#: then narrating and grading finished steps and rollouts, then guiding, then the agents.
PRIORITY: dict[str, int] = {"judge": 0, "narrative": 1, "critic": 1, "prm": 2}
_AGENT_RANK = 3
#: Tokens assumed for an answer before any answer of the module has been seen.
_DEFAULT_OUTPUT = 1000
#: Weight of the newest call in the running estimate of a module's tokens.
_EWMA = 0.2


@dataclass
class _Axis:
    """One limit of the account as this client models it (a bucket of a minute's worth)."""

    capacity: float
    level: float
    updated: float

    def refill(self, now: float) -> None:
        if now > self.updated:
            self.level = min(self.capacity, self.level + (now - self.updated) * self.capacity / 60.0)
            self.updated = now

    def until(self, amount: float, reserve: float) -> float:
        need = min(amount, self.capacity) + reserve * self.capacity
        need = min(need, self.capacity)
        return max((need - self.level) * 60.0 / self.capacity, 0.0)


@dataclass
class BudgetStats:
    """What one budget did."""

    calls: int = 0
    paced: int = 0
    paced_seconds: float = 0.0
    refused: int = 0


@dataclass
class Ticket:
    """One admitted attempt: what it was charged, and how long it was held."""

    module: str
    cost: dict[str, float]
    held: float = 0.0


@dataclass(order=True)
class _Waiter:
    rank: int
    seq: int
    cost: dict[str, float] = field(compare=False)
    future: asyncio.Future[None] = field(compare=False)


def _headers_of(source: object) -> dict[str, str]:
    get = getattr(source, "items", None)
    if get is None:
        return {}
    return {str(k).lower(): str(v) for k, v in source.items()}  # type: ignore[attr-defined]


def _seconds_until(stamp: str) -> float | None:
    try:
        when = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(when.timestamp() - clock.now(), 0.0) if when.tzinfo else None


def _limits_in(headers: Mapping[str, str]) -> dict[str, tuple[float, float]]:
    """(limit, remaining) per axis named in the headers."""
    found: dict[str, tuple[float, float]] = {}
    for axis in ("requests", "tokens"):
        limit, remaining = headers.get(f"x-ratelimit-limit-{axis}"), headers.get(f"x-ratelimit-remaining-{axis}")
        if limit and remaining:
            try:
                found[axis] = (float(limit), float(remaining))
            except ValueError:
                continue
    for axis in ("requests", "input-tokens", "output-tokens"):
        limit = headers.get(f"anthropic-ratelimit-{axis}-limit")
        remaining = headers.get(f"anthropic-ratelimit-{axis}-remaining")
        if limit and remaining:
            try:
                found[axis] = (float(limit), float(remaining))
            except ValueError:
                continue
    if "input-tokens" not in found and "tokens" not in found:  # Anthropic's aggregate, when alone
        limit, remaining = headers.get("anthropic-ratelimit-tokens-limit"), headers.get("anthropic-ratelimit-tokens-remaining")
        if limit and remaining:
            try:
                found["tokens"] = (float(limit), float(remaining))
            except ValueError:
                pass
    return {axis: v for axis, v in found.items() if v[0] > 0}


def _exhausted_reset(headers: Mapping[str, str]) -> tuple[str, float] | None:
    """The axis a refusal names as spent (remaining 0) and when it is full again."""
    for axis in ("requests", "tokens"):
        if headers.get(f"x-ratelimit-remaining-{axis}", "").strip() == "0":
            reset = parse_duration(headers.get(f"x-ratelimit-reset-{axis}", ""))
            return axis, reset if reset is not None else 60.0
    for axis in ("requests", "input-tokens", "output-tokens"):
        if headers.get(f"anthropic-ratelimit-{axis}-remaining", "").strip() == "0":
            reset = _seconds_until(headers.get(f"anthropic-ratelimit-{axis}-reset", ""))
            return axis, reset if reset is not None else 60.0
    return None


class RateBudget:
    """The rate limits of one (endpoint, model), shared by every call of the loop."""

    def __init__(self, key: str, *, pacing: bool = True, reserve: float = 0.02, probe: bool = True) -> None:
        self.key = key
        self.pacing = pacing
        #: Whether the first call goes alone until its answer says the limits (an endpoint
        #: that announces them); otherwise calls go out unpaced until an answer does.
        self.probe = probe
        #: Share of each bucket kept free, for the answers' tokens and other clients.
        self.reserve = reserve
        self.axes: dict[str, _Axis] = {}
        self.stats = BudgetStats()
        self._tokens: dict[str, tuple[float, float, float]] = {}  # module -> (input, output, cached)
        self._queue: list[_Waiter] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        #: Set once the first call has been answered or refused (the limits are then known,
        #: or known to be unsaid); until then that call is the only one out.
        self._probe: asyncio.Future[None] | None = None
        self.learned = False

    # -- estimates -------------------------------------------------------------------------

    def _estimate(self, module: str, messages: list[ChatMessage], config: GenerateConfig) -> tuple[float, float, float]:
        known = self._tokens.get(module)
        if known is not None:
            return known
        prompt = 0
        for message in messages:
            for part in message.parts():
                prompt += image_tokens(part.data, "openai", part.detail) if isinstance(part, ImagePart) \
                    else math.ceil(len(part.text) / 4)
        return float(prompt), float(config.max_tokens or _DEFAULT_OUTPUT), 0.0

    def _cost(self, module: str, messages: list[ChatMessage], config: GenerateConfig) -> dict[str, float]:
        prompt, output, cached = self._estimate(module, messages, config)
        return {"requests": 1.0, "tokens": prompt + output, "input-tokens": max(prompt - cached, 0.0),
                "output-tokens": output}

    # -- admission ------------------------------------------------------------------------

    async def admit(self, module: str, messages: list[ChatMessage], config: GenerateConfig) -> Ticket:
        """Wait until the account can take this call (at once when not pacing or when the
        limits are not known yet), charge it, and return its ticket."""
        self.stats.calls += 1
        cost = self._cost(module, messages, config)
        ticket = Ticket(module, cost)
        started = clock.monotonic()
        while self.pacing and self.probe and not self.learned:
            if self._probe is None:  # this call finds the limits out; the others wait for it
                self._probe = asyncio.get_running_loop().create_future()
                ticket.held = clock.monotonic() - started
                return ticket
            await asyncio.shield(self._probe)
        ticket.held = clock.monotonic() - started
        if not self.pacing or not self.axes:
            self._charge(cost)
            return ticket
        loop = asyncio.get_running_loop()
        waiter = _Waiter(PRIORITY.get(module, _AGENT_RANK), next(self._seq), cost, loop.create_future())
        heapq.heappush(self._queue, waiter)
        self._pump()
        if waiter.future.done():
            return ticket
        started = clock.monotonic()
        try:
            await waiter.future
        finally:
            if not waiter.future.done():
                waiter.future.cancel()
        ticket.held += clock.monotonic() - started
        self.stats.paced += 1
        self.stats.paced_seconds += ticket.held
        return ticket

    def _charge(self, cost: Mapping[str, float]) -> None:
        now = clock.monotonic()
        for axis, bucket in self.axes.items():
            bucket.refill(now)
            bucket.level -= cost.get(axis, 0.0)

    def _pump(self) -> None:
        """Let held calls go, best rank first, while the buckets take them; else wake later."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = clock.monotonic()
        for bucket in self.axes.values():
            bucket.refill(now)
        while self._queue:
            head = self._queue[0]
            if head.future.done():  # cancelled while it waited
                heapq.heappop(self._queue)
                continue
            wait = max((b.until(head.cost.get(axis, 0.0), self.reserve) for axis, b in self.axes.items()), default=0.0)
            if wait > 0:
                self._timer = asyncio.get_running_loop().call_later(max(wait, 0.001), self._pump)
                return
            heapq.heappop(self._queue)
            self._charge(head.cost)
            head.future.set_result(None)

    # -- learning -------------------------------------------------------------------------

    def answered(self, ticket: Ticket, usage: Usage, headers: Mapping[str, str]) -> None:
        """An answer arrived: learn the limits, correct the charge by what was used."""
        prompt, output, cached = usage.input_tokens, usage.output_tokens, usage.cached_tokens
        old = self._tokens.get(ticket.module)
        self._tokens[ticket.module] = (prompt, output, cached) if old is None else tuple(
            (1 - _EWMA) * o + _EWMA * n for o, n in zip(old, (prompt, output, cached), strict=True))  # type: ignore[assignment]
        actual = {"requests": 1.0, "tokens": float(prompt + output), "input-tokens": float(max(prompt - cached, 0)),
                  "output-tokens": float(output)}
        for axis, bucket in self.axes.items():
            bucket.level += ticket.cost.get(axis, 0.0) - actual.get(axis, 0.0)
        self._learn(_headers_of(headers))
        self._learned()
        if self._queue:
            self._pump()

    def _learned(self) -> None:
        """The first answer (or refusal) is in: release the calls that waited for it."""
        if not self.learned:
            self.learned = True
            if self._probe is not None and not self._probe.done():
                self._probe.set_result(None)

    def failed(self, ticket: Ticket, headers: Mapping[str, str] | None, *, refused: bool) -> None:
        """An attempt failed; a refusal (429) empties the bucket it names until its reset."""
        found = _headers_of(headers) if headers is not None else {}
        self._learn(found)
        for axis, bucket in self.axes.items():  # nothing was used
            bucket.level += ticket.cost.get(axis, 0.0)
        if refused:
            self.stats.refused += 1
            spent = _exhausted_reset(found)
            if spent is not None and spent[0] in self.axes:
                axis, _reset = spent
                bucket = self.axes[axis]
                bucket.refill(clock.monotonic())
                bucket.level = min(bucket.level, 0.0)
        if self.axes or refused:
            self._learned()
        elif self._probe is not None and not self._probe.done():  # failed without a word: another call probes
            probe, self._probe = self._probe, None
            probe.set_result(None)
        if self._queue:
            self._pump()

    def _learn(self, headers: Mapping[str, str]) -> None:
        now = clock.monotonic()
        for axis, (limit, remaining) in _limits_in(headers).items():
            bucket = self.axes.get(axis)
            if bucket is None:
                self.axes[axis] = _Axis(limit, remaining, now)
                continue
            bucket.refill(now)
            bucket.capacity = limit
            # The provider's count can only show more use than ours (another client on the
            # account): follow it down when it is clearly lower, never up.
            if remaining < bucket.level - 0.2 * limit:
                bucket.level = remaining


_Registry = dict[str, RateBudget]
_BUDGETS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Registry] = weakref.WeakKeyDictionary()
_PACING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, bool] = weakref.WeakKeyDictionary()


def configure(*, pacing: bool) -> None:
    """Set whether calls on the running loop are paced (new budgets are made accordingly)."""
    loop = asyncio.get_running_loop()
    _PACING[loop] = pacing
    for budget in _BUDGETS.get(loop, {}).values():
        budget.pacing = pacing


def budget_for(key: str, *, probe: bool = True) -> RateBudget:
    """The budget of `key` (an endpoint and a model) on the running loop; `probe` says
    whether its endpoint announces its limits (see `RateBudget.probe`)."""
    loop = asyncio.get_running_loop()
    registry = _BUDGETS.setdefault(loop, {})
    found = registry.get(key)
    if found is None:
        found = registry[key] = RateBudget(key, pacing=_PACING.get(loop, True), probe=probe)
    return found


def budgets() -> dict[str, RateBudget]:
    """Every budget of the running loop, by key."""
    return dict(_BUDGETS.get(asyncio.get_running_loop(), {}))
