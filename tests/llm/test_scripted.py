"""The scripted provider is strict and keeps every request; ChatModel's contract over it."""

from __future__ import annotations

import time

import pytest

from core.llm import (
    ChatMessage,
    ChatModel,
    GenerateConfig,
    ImagePart,
    Ledger,
    ModelCallError,
    Reply,
    Script,
    ScriptError,
    TextPart,
    UnknownProviderError,
)

USER = [ChatMessage(role="user", content="hello")]


async def test_replies_in_order_and_requests_are_kept() -> None:
    script = Script("s", [Reply(text="one"), lambda req: f"echo {req.messages[-1].text()}"])
    model = ChatModel.from_name("scripted/s")
    assert model.name == "scripted/s"
    first = await model.generate(USER, module="policy", config=GenerateConfig(temperature=0.5))
    second = await model.generate([ChatMessage(role="user", content="again")], module="judge")
    assert (first.text, second.text) == ("one", "echo again")
    assert [r.module for r in script.requests] == ["policy", "judge"]
    assert script.requests[0].config.temperature == 0.5
    assert first.usage.estimated and first.usage.input_tokens > 0
    script.assert_done()


async def test_extra_call_raises_and_is_remembered() -> None:
    script = Script("s", [Reply(text="only")])
    model = ChatModel.from_name("scripted/s")
    await model.generate(USER, module="m")
    with pytest.raises(ScriptError, match="only 1 steps"):
        await model.generate(USER, module="m")
    with pytest.raises(ScriptError):
        script.assert_done()


async def test_unused_steps_fail_assert_done() -> None:
    script = Script("s", [Reply(text="a"), Reply(text="b")])
    await ChatModel.from_name("scripted/s").generate(USER, module="m")
    with pytest.raises(ScriptError, match="1 unused"):
        script.assert_done()


async def test_unknown_script_and_provider_are_clear() -> None:
    with pytest.raises(ScriptError, match="no script named 'nope'"):
        ChatModel.from_name("scripted/nope")
    with pytest.raises(UnknownProviderError, match="unknown model provider 'nosuch'"):
        ChatModel.from_name("nosuch/model")
    with pytest.raises(UnknownProviderError, match="provider/model"):
        ChatModel.from_name("gpt-4o")


async def test_delay_and_image_estimate() -> None:
    Script("s", [Reply(text="late", delay=0.2)])
    image = ChatMessage(role="user", content=[TextPart(text="see"), ImagePart(data=b"\x89PNG")])
    start = time.perf_counter()
    out = await ChatModel.from_name("scripted/s").generate([image], module="m")
    assert time.perf_counter() - start >= 0.2
    assert out.usage.input_tokens >= 85


async def test_scripted_errors_retry_then_succeed_and_count_in_ledger() -> None:
    Script("s", [Reply(error=429), Reply(error=503), Reply(fault="drop"), Reply(text="ok")])
    ledger = Ledger()
    out = await ChatModel.from_name("scripted/s", ledger=ledger).generate(USER, module="policy")
    assert out.text == "ok"
    (record,) = ledger.records
    assert record.retries == 3 and record.error is None


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(error=401), "auth"),
        (Reply(error=400), "bad_request"),
        (Reply(error=400, message="This model's maximum context length is 128000 tokens"), "context_length"),
        (Reply(error=ValueError("boom")), "error"),
    ],
)
async def test_not_retried(reply: Reply, reason: str) -> None:
    script = Script("s", [reply, Reply(text="never")])
    ledger = Ledger()
    with pytest.raises(ModelCallError) as info:
        await ChatModel.from_name("scripted/s", ledger=ledger).generate(USER, module="m")
    assert info.value.reason == reason
    assert len(script.requests) == 1
    assert ledger.records[0].error is not None and ledger.records[0].retries == 0


async def test_retry_after_is_honoured_with_zero_backoff() -> None:
    Script("s", [Reply(error=429, retry_after=0.3), Reply(text="ok")])
    start = time.perf_counter()
    await ChatModel.from_name("scripted/s").generate(USER, module="m")
    assert 0.3 <= time.perf_counter() - start < 1.0


async def test_timeout_is_transient() -> None:
    Script("s", [Reply(text="slow", delay=1.0), Reply(text="fast")])
    ledger = Ledger()
    model = ChatModel.from_name("scripted/s", ledger=ledger, timeout=0.1)
    assert (await model.generate(USER, module="m")).text == "fast"
    assert ledger.records[0].retries == 1


async def test_gives_up_after_max_attempts() -> None:
    from core.llm import RetryPolicy

    Script("s", [Reply(error=500)] * 3)
    model = ChatModel.from_name("scripted/s", retry=RetryPolicy(max_attempts=3))
    with pytest.raises(ModelCallError, match="after 2 retries") as info:
        await model.generate(USER, module="m")
    assert (info.value.status, info.value.reason) == (500, "server_error")


async def test_with_tags_reaches_the_ledger() -> None:
    Script("s", [Reply(text="a"), Reply(text="b")])
    ledger = Ledger()
    base = ChatModel.from_name("scripted/s", ledger=ledger, tags={"run": "r1"})
    tagged = base.with_tags(task="t7", rollout=3)
    await tagged.generate(USER, module="policy")
    await base.generate(USER, module="policy")
    assert ledger.records[0].tags == {"run": "r1", "task": "t7", "rollout": "3"}
    assert ledger.records[1].tags == {"run": "r1"}


async def test_a_malformed_body_is_retried_and_counted() -> None:
    Script("s", [Reply(fault="malformed"), Reply(fault="empty"), Reply(text="fine")])
    ledger = Ledger()
    out = await ChatModel.from_name("scripted/s", ledger=ledger).generate(USER, module="m")
    assert out.text == "fine" and ledger.records[0].retries == 2 and ledger.records[0].error is None
