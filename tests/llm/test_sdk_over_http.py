"""The official openai and anthropic SDKs over real loopback HTTP, through ChatModel."""

from __future__ import annotations

import asyncio
import time
from email.utils import formatdate
from typing import Any

import pytest

from core.llm import (
    ChatMessage,
    ChatModel,
    GenerateConfig,
    ImagePart,
    Ledger,
    ModelCallError,
    PriceTable,
    Reply,
    RetryPolicy,
    Sampling,
    Script,
    TextPart,
    Usage,
)
from testing.llm import AnthropicServer

PNG = bytes(range(256)) * 40  # arbitrary bytes, including every byte value
SYSTEM = ChatMessage(role="system", content="You operate a desktop.")
SCREEN = ChatMessage(role="user", cache=True, content=[TextPart(text="What is on screen?"),
                                                       ImagePart(data=PNG)])
ASK = [SYSTEM, SCREEN]


async def test_text_and_image_arrive_intact(serve: Any, wire: Any, api_key: str) -> None:
    async with serve([Reply(text="a terminal", finish_reason="stop")]) as (server, model):
        config = GenerateConfig(max_tokens=300, sampling=Sampling.deterministic())
        out = await model.generate(ASK, module="policy", config=config)
    assert out.text == "a terminal" and out.finish_reason == "stop"
    (seen,) = server.script.requests
    assert seen.messages[0].text() == "You operate a desktop."
    parts = seen.messages[1].parts()
    assert isinstance(parts[0], TextPart) and parts[0].text == "What is on screen?"
    assert isinstance(parts[1], ImagePart) and parts[1].data == PNG and parts[1].media_type == "image/png"
    assert seen.config.max_tokens == 300
    body = server.requests[0].body
    if wire.name == "openai":
        assert body["max_completion_tokens"] == 300 and "max_tokens" not in body
        assert body["temperature"] == 0.0  # "deterministic" where the model takes a temperature
        assert body["messages"][1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    else:
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][0]["content"][1]["source"]["type"] == "base64"
        # The SDK's API version takes no sampling values at all: the intent sends none.
        assert not {"temperature", "top_p", "top_k"} & set(body)
    assert server.requests[0].credential == api_key


REASONING_WIRE = {"openai": "openai/gpt-5.2", "anthropic": "anthropic/claude-haiku-4-5"}


async def test_reasoning_effort_on_the_wire(serve: Any, wire: Any) -> None:
    config = GenerateConfig(reasoning_effort="low", max_tokens=2000, seed=7, sampling=Sampling.diverse(0.5))
    async with serve([Reply(text="ok")], model=REASONING_WIRE[wire.name]) as (server, model):
        await model.generate(ASK, module="policy", config=config)
    body = server.requests[0].body
    assert "temperature" not in body  # neither model takes one while reasoning
    if wire.name == "openai":
        assert body["reasoning_effort"] == "low" and body["seed"] == 7
        assert body["max_completion_tokens"] == 2000
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert body["max_tokens"] == 2000 + 2048 and "seed" not in body


async def test_adaptive_thinking_on_the_wire() -> None:
    """Claude models from Opus 4.7 on think adaptively, the effort in output_config."""
    async with AnthropicServer(Script("adaptive", [Reply(text="ok")])) as server:
        model = ChatModel.from_name("anthropic/claude-opus-5-5", base_url=server.base_url, api_key="k")
        await model.generate(ASK, module="policy", config=GenerateConfig(reasoning_effort="minimal",
                                                                         max_tokens=2000))
        await model.aclose()
    body = server.requests[0].body
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "low"}
    assert body["max_tokens"] == 2000 and server.script.requests[0].config.reasoning_effort == "low"


async def test_error_storm_is_retried_then_succeeds(serve: Any) -> None:
    storm = [Reply(error=429), Reply(error=500), Reply(error=503), Reply(error=429), Reply(text="finally")]
    ledger = Ledger()
    async with serve(storm, ledger=ledger) as (server, model):
        out = await model.generate(ASK, module="policy")
    assert out.text == "finally" and len(server.requests) == 5
    (record,) = ledger.records
    assert record.retries == 4 and record.error is None and record.module == "policy"


async def test_timeouts_and_dropped_connections_are_retried(serve: Any) -> None:
    steps = [Reply(text="too late", delay=1.5), Reply(fault="drop"), Reply(text="ok")]
    ledger = Ledger()
    async with serve(steps, ledger=ledger, timeout=0.3) as (server, model):
        assert (await model.generate(ASK, module="m")).text == "ok"
    assert ledger.records[0].retries == 2 and len(server.requests) == 3


async def test_retry_after_seconds_is_honoured(serve: Any) -> None:
    async with serve([Reply(error=429, retry_after=0.5), Reply(text="ok")]) as (_, model):
        start = time.perf_counter()
        await model.generate(ASK, module="m")
    assert 0.5 <= time.perf_counter() - start < 1.5


async def test_retry_after_http_date_is_honoured(serve: Any, wire: Any) -> None:
    if wire.name != "openai":
        pytest.skip("one protocol suffices for the date form")
    when = formatdate(time.time() + 2, usegmt=True)  # one-second resolution: waits 1-2 s
    async with serve([Reply(error=503, retry_after=when), Reply(text="ok")]) as (_, model):
        start = time.perf_counter()
        await model.generate(ASK, module="m")
    assert time.perf_counter() - start >= 0.9


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(error=400), "bad_request"),
        (Reply(error=401), "auth"),
        (Reply(error=403), "auth"),
        (Reply(error=400, message="prompt is too long: 210000 tokens > 200000 maximum"), "context_length"),
        (Reply(error=400, message="This model's maximum context length is 128000 tokens."), "context_length"),
    ],
)
async def test_no_retry_on_client_errors(serve: Any, reply: Reply, reason: str) -> None:
    ledger = Ledger()
    async with serve([reply], ledger=ledger) as (server, model):
        with pytest.raises(ModelCallError) as info:
            await model.generate(ASK, module="m")
    assert info.value.reason == reason and info.value.status == reply.error
    assert len(server.requests) == 1
    assert ledger.records[0].retries == 0 and ledger.records[0].error


async def test_wrong_key_is_an_auth_error_without_the_key(serve: Any) -> None:
    async with serve([], server_key="the-right-key") as (server, model):
        with pytest.raises(ModelCallError) as info:
            await model.generate(ASK, module="m")
    assert info.value.reason == "auth" and len(server.requests) == 1


@pytest.mark.parametrize("fault", ["malformed", "empty"])
async def test_malformed_body_is_retried_then_one_clear_error(serve: Any, fault: str) -> None:
    """A garbled body is the wire's fault, like a dropped connection: asked again, counted,
    and one clear error only when every attempt is garbled."""
    ledger = Ledger()
    async with serve([Reply(fault=fault), Reply(text="fine")], ledger=ledger) as (server, model):  # type: ignore[arg-type]
        out = await model.generate(ASK, module="m")
    assert out.text == "fine" and len(server.requests) == 2 and ledger.records[0].retries == 1


@pytest.mark.parametrize("fault", ["malformed", "empty"])
async def test_malformed_bodies_to_the_last_attempt_are_one_clear_error(serve: Any, fault: str) -> None:
    async with serve([Reply(fault=fault)] * 2, retry=RetryPolicy(max_attempts=2)) as (server, model):  # type: ignore[arg-type]
        with pytest.raises(ModelCallError, match=r"malformed|not valid JSON") as info:
            await model.generate(ASK, module="m")
    assert info.value.reason == "malformed" and len(server.requests) == 2
    assert "\n" not in str(info.value)


async def test_ledger_prices_cached_tokens(serve: Any, wire: Any) -> None:
    writes = 100_000 if wire.name == "anthropic" else 0
    usage = Usage(input_tokens=1_000_000, cached_tokens=600_000, cache_write_tokens=writes, output_tokens=20_000)
    prices = PriceTable()
    ledger = Ledger()
    async with serve([Reply(text="ok", usage=usage)], ledger=ledger, prices=prices) as (_, model):
        out = await model.generate(ASK, module="judge")
    assert out.usage == usage
    (record,) = ledger.records
    assert (record.input_tokens, record.cached_tokens, record.cache_write_tokens) == (1_000_000, 600_000, writes)
    price = prices.lookup(wire.model)
    assert price is not None and price.cached_input is not None
    plain = 1_000_000 - 600_000 - writes
    expected = (plain * price.input + 600_000 * price.cached_input
                + writes * (price.cache_write or price.input) + 20_000 * price.output) / 1e6
    assert record.dollars == pytest.approx(expected)
    assert record.dollars < prices.cost(wire.model, Usage(input_tokens=1_000_000, output_tokens=20_000))


async def test_concurrency_limit_holds_across_models_of_one_endpoint(serve: Any, wire: Any,
                                                                     api_key: str) -> None:
    steps = [Reply(text=str(i), delay=0.1) for i in range(12)]
    async with serve(steps, max_connections=3) as (server, model):
        other = ChatModel.from_name(wire.model, base_url=server.base_url, api_key=api_key, max_connections=3)
        calls = [m.generate(ASK, module="m") for m in (model, model.with_tags(rollout=1), other) for _ in range(4)]
        outs = await asyncio.gather(*calls)
        await other.aclose()
    assert sorted(o.text for o in outs) == sorted(str(i) for i in range(12))
    assert server.max_in_flight == 3
