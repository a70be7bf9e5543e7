"""Rate limits as one shared budget, against simulated models that refuse as providers do.

A simulated model's refusal is its provider SDK's own 429 exception, built by the SDK from
a response carrying the provider's rate-limit headers; the model layer reads it like a
real one. Many calls started at once against a tight limit: sent blind, the provider
refuses many and each waits out the reset it names; paced by the run's budget (learned
from the headers), none is refused and the batch ends sooner. Held calls leave judging
first."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from core import clock
from core.llm import ChatMessage, ChatModel, GenerateConfig, Ledger, RetryPolicy, rate_budget
from core.llm.rate_budget import RateBudget
from core.llm.sim import SimAPI, SimRequest, configure, set_responder

ASK = [ChatMessage(role="user", content="go")]


@pytest.fixture
def sim_figures() -> Iterator[Any]:
    """Tight example accounts and a responder that says "ok"; the defaults come back after."""
    from core.llm.sim import provider

    before = list(provider._RESPONDER)

    def figures(**limits_by_provider: dict[str, float]) -> None:
        configure(overrides={"providers": {p: {"limits": v} for p, v in limits_by_provider.items()},
                             "modules": {"policy": {"latency": {"median": 10.0, "mean": 12.0}},
                                         "judge": {"latency": {"median": 10.0}}}})

    set_responder(lambda request: f"ok from {request.module}")
    yield figures
    configure()
    provider._RESPONDER[:] = before


def _sim(name: str) -> SimAPI:
    return SimAPI(name, timeout=600.0)


def test_refusals_are_the_sdks_own_429s_with_the_providers_headers(sim_figures: Any) -> None:
    sim_figures(openai={"requests_per_minute": 3, "tokens_per_minute": 10_000_000},
                anthropic={"requests_per_minute": 2, "input_tokens_per_minute": 10_000_000,
                           "output_tokens_per_minute": 10_000_000})

    async def main() -> tuple[list[Any], list[Any]]:
        gpt, claude = _sim("openai/gpt-5-2025-08-07"), _sim("anthropic/claude-opus-4-5")
        config = GenerateConfig()
        first = await asyncio.gather(*(gpt.generate(ASK, config) for _ in range(4)), return_exceptions=True)
        second = await asyncio.gather(*(claude.generate(ASK, config) for _ in range(3)), return_exceptions=True)
        return first, second

    from core.llm.provider import current_module
    current_module.set("policy")
    gpt_out, claude_out = clock.run(main(), clock.ClockSpec())
    answered = [o for o in gpt_out if not isinstance(o, BaseException)]
    refused = [o for o in gpt_out if isinstance(o, BaseException)]
    assert len(answered) == 3 and len(refused) == 1
    assert answered[0].rate_headers["x-ratelimit-limit-requests"] == "3"
    error = refused[0]
    assert isinstance(error, openai.RateLimitError) and error.status_code == 429
    assert error.body["code"] == "rate_limit_exceeded" and error.body["type"] == "requests"
    assert "Please try again in" in error.body["message"]
    assert error.response.headers["x-ratelimit-remaining-requests"] == "0"
    decision = _sim("openai/gpt-5-2025-08-07").classify(error)
    assert decision.kind == "rate_limit" and decision.retry_after is not None and 0 < decision.retry_after <= 60

    claude_refused = [o for o in claude_out if isinstance(o, BaseException)]
    assert len(claude_refused) == 1
    error = claude_refused[0]
    assert isinstance(error, anthropic.RateLimitError) and error.status_code == 429
    assert error.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert int(error.response.headers["retry-after"]) >= 1
    assert error.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert _sim("anthropic/claude-opus-4-5").classify(error).kind == "rate_limit"


def _batch(pacing: bool, n: int) -> tuple[Ledger, float]:
    async def main() -> tuple[Ledger, float]:
        rate_budget.configure(pacing=pacing)
        ledger = Ledger()
        model = ChatModel(_sim("openai/gpt-5-2025-08-07"), ledger=ledger, max_connections=1000,
                          retry=RetryPolicy(budget=3600, max_attempts=50, backoff_scale=0.0))
        start = clock.monotonic()
        await asyncio.gather(*(model.generate(ASK, module="policy") for _ in range(n)))
        return ledger, clock.monotonic() - start

    return clock.run(main(), clock.ClockSpec())


def test_pacing_refuses_nothing_where_blind_retries_are_refused_again_and_again(sim_figures: Any) -> None:
    sim_figures(openai={"requests_per_minute": 60, "tokens_per_minute": 100_000_000})
    blind, blind_seconds = _batch(pacing=False, n=150)
    paced, paced_seconds = _batch(pacing=True, n=150)
    refused_blind = sum(r.refusals for r in blind.records)
    assert refused_blind >= 90 and sum(r.refused_seconds for r in blind.records) > 0
    assert sum(r.refusals for r in paced.records) == 0
    assert sum(r.paced_seconds for r in paced.records) > 0
    assert all(r.error is None for r in [*blind.records, *paced.records])
    assert paced_seconds < blind_seconds  # 150 calls at 60 a minute: about 90 s paced


def test_held_calls_leave_judging_first() -> None:
    async def main() -> list[str]:
        budget = RateBudget("test", pacing=True, reserve=0.0)
        budget.learned = True
        budget._learn({"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0",
                       "x-ratelimit-limit-tokens": "1000000", "x-ratelimit-remaining-tokens": "1000000"})
        order: list[str] = []

        async def call(module: str) -> None:
            await budget.admit(module, ASK, GenerateConfig())
            order.append(module)

        tasks = [asyncio.ensure_future(call("policy")) for _ in range(3)]
        await asyncio.sleep(0)
        tasks.append(asyncio.ensure_future(call("judge")))  # queued last, leaves first
        await asyncio.gather(*tasks)
        return order

    assert clock.run(main(), clock.ClockSpec()) == ["judge", "policy", "policy", "policy"]


def test_limits_are_learned_from_either_providers_headers() -> None:
    async def main() -> tuple[dict[str, float], dict[str, float]]:
        gpt = RateBudget("a")
        gpt._learn({"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499",
                    "x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "29000",
                    "x-ratelimit-reset-tokens": "2s"})
        claude = RateBudget("b")
        claude._learn({"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
                       "anthropic-ratelimit-input-tokens-limit": "40000",
                       "anthropic-ratelimit-input-tokens-remaining": "39000",
                       "anthropic-ratelimit-output-tokens-limit": "8000",
                       "anthropic-ratelimit-output-tokens-remaining": "8000",
                       "anthropic-ratelimit-tokens-limit": "40000", "anthropic-ratelimit-tokens-remaining": "39000"})
        return ({a: b.capacity for a, b in gpt.axes.items()}, {a: b.capacity for a, b in claude.axes.items()})

    gpt, claude = clock.run(main(), clock.ClockSpec())
    assert gpt == {"requests": 500, "tokens": 30000}
    assert claude == {"requests": 50, "input-tokens": 40000, "output-tokens": 8000}


def test_a_simulated_model_is_held_to_the_real_models_rules(sim_figures: Any) -> None:
    """GPT-5 takes no temperature: the real adapter refuses it, and so does its stand-in."""
    from core.llm.profiles import UnsupportedSettingError

    async def main() -> None:
        await _sim("openai/gpt-5-2025-08-07").generate(ASK, GenerateConfig(temperature=0.3))

    with pytest.raises(UnsupportedSettingError):
        clock.run(main(), clock.ClockSpec())


def test_a_responder_sees_the_module_and_the_real_model(sim_figures: Any) -> None:
    seen: list[SimRequest] = []
    set_responder(lambda request: seen.append(request) or "fine")  # type: ignore[func-returns-value]

    async def main() -> str:
        model = ChatModel(_sim("anthropic/claude-opus-4-5"), ledger=Ledger())
        out = await model.generate(ASK, module="judge")
        assert model.ledger is not None and model.ledger.records[0].dollars > 0  # priced as the real model
        return out.text

    assert clock.run(main(), clock.ClockSpec()) == "fine"
    assert (seen[0].module, seen[0].model) == ("judge", "anthropic/claude-opus-4-5")
