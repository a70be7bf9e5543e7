"""What real models do at the edges, through the official SDKs against the strict servers:
refusals and content filters, spend limits, an HTML error page, cache writes, and the
output limit that thinking shares with the answer."""

from __future__ import annotations

import anthropic
import pytest

from core.llm import (
    ChatMessage,
    ChatModel,
    GenerateConfig,
    Ledger,
    ModelCallError,
    PriceTable,
    Reply,
    RetryPolicy,
    Script,
    Usage,
)
from core.llm.errors import FINAL_REASONS, one_line
from core.llm.limits import ANSWER_TOKENS, THINKING_ROOM
from core.llm.notices import RetryNotice, watching_retries
from testing.llm import AnthropicServer, OpenAIServer
from testing.llm.thinking import SIMULATED_THINKING

KEY = "sk-edges-0123456789"
ASK = [ChatMessage(role="system", content="Judge the rollout."), ChatMessage(role="user", content="verdict?")]


async def _call(server_cls: type, name: str, steps: list[Reply], *, module: str = "judge",
                config: GenerateConfig | None = None, retry: RetryPolicy | None = None
                ) -> tuple[ModelCallError | str, Ledger, list[dict]]:
    ledger = Ledger()
    async with server_cls(Script(name, steps), api_key=KEY) as server:
        model = ChatModel.from_name(name, base_url=server.base_url, api_key=KEY, ledger=ledger, retry=retry)
        try:
            out: ModelCallError | str = (await model.generate(ASK, module=module, config=config)).text
        except ModelCallError as exc:
            out = exc
        finally:
            await model.aclose()
    return out, ledger, [r.body for r in server.requests]


@pytest.mark.parametrize(("server_cls", "name", "reply", "kind"), [
    (OpenAIServer, "openai/gpt-6.1-sol", Reply(finish_reason="refusal", refusal="I can't help with that."), "refusal"),
    (OpenAIServer, "openai/gpt-6.1-sol", Reply(text="The screen sh", finish_reason="content_filter"), "content_filter"),
    (AnthropicServer, "anthropic/claude-opus-5-5", Reply(text="I won't", finish_reason="refusal"), "refusal"),
])
async def test_a_refusal_is_its_own_final_error_kind_billed_and_never_retried(server_cls: type, name: str,
                                                                            reply: Reply, kind: str) -> None:
    out, ledger, bodies = await _call(server_cls, name, [reply, Reply(text="never asked")])
    assert isinstance(out, ModelCallError) and out.reason == kind and kind in FINAL_REASONS
    assert len(bodies) == 1  # one request: not retried, not re-asked as a format error
    (record,) = ledger.records
    assert record.error_kind == kind and record.error and record.output_tokens > 0 and record.dollars > 0


@pytest.mark.parametrize(("server_cls", "name", "status", "code"), [
    (OpenAIServer, "openai/gpt-6.1-sol", 429, "organization_spend_limit_exceeded"),
    (OpenAIServer, "openai/gpt-6.1-sol", 429, "project_spend_limit_exceeded"),
    (AnthropicServer, "anthropic/claude-opus-5-5", 429, "enforced_spend_limit_reached"),
    (AnthropicServer, "anthropic/claude-opus-5-5", 429, "contract_spend_limit_reached"),
    (AnthropicServer, "anthropic/claude-opus-5-5", 402, "linked_organization_spend_limit_reached"),
])
async def test_a_spend_limit_is_final_not_a_rate_limit(server_cls: type, name: str, status: int, code: str) -> None:
    limit = Reply(error=status, code=code, message="You have reached your spend limit.")
    out, ledger, bodies = await _call(server_cls, name, [limit, Reply(text="never asked")])
    assert isinstance(out, ModelCallError) and out.reason == "spend_limit" and out.status == status
    assert "spend limit" in str(out) and "raise or remove it" in str(out)
    assert len(bodies) == 1 and ledger.records[0].error_kind == "spend_limit"
    if code == "enforced_spend_limit_reached":  # the SDK's own class for it
        assert isinstance(out.__cause__, anthropic.EnforcedSpendLimitReachedError)


async def test_a_ramp_limit_is_still_a_rate_limit_and_waited_out() -> None:
    """Anthropic's other 429 codes stay rate limits: the spend rule names its codes only."""
    out, _, bodies = await _call(AnthropicServer, "anthropic/claude-opus-5-5",
                                 [Reply(error=429, code="ramp_limit_exceeded", retry_after=0), Reply(text="ok")])
    assert out == "ok" and len(bodies) == 2


async def test_an_html_error_page_becomes_one_short_line() -> None:
    steps = [Reply(error=502, fault="html")] * 2
    out, ledger, _ = await _call(OpenAIServer, "openai/gpt-6.1-sol", steps, retry=RetryPolicy(max_attempts=2))
    assert isinstance(out, ModelCallError) and out.reason == "server_error"
    text = str(out)
    assert "\n" not in text and "<" not in text and "502 Bad Gateway" in text and "(an HTML page)" in text
    assert len(text) < 400 and ledger.records[0].error == text.split(": ", 1)[1].rsplit(" (server_error", 1)[0]


def test_one_line_keeps_a_plain_message_and_cuts_a_long_one() -> None:
    assert one_line("Error code: 400 - bad\n  request") == "Error code: 400 - bad request"
    assert len(one_line("x" * 1000)) == 300
    assert one_line("Error code: 503 - <html><body><h1>Service Unavailable</h1></body></html>") == (
        "Error code: 503: Service Unavailable (an HTML page)")


async def test_openai_cache_writes_are_priced_at_their_own_rate() -> None:
    usage = Usage(input_tokens=10_000, cached_tokens=2_000, cache_write_tokens=6_000, output_tokens=500)
    out, ledger, _ = await _call(OpenAIServer, "openai/gpt-6.1-sol", [Reply(text="ok", usage=usage)])
    assert out == "ok"
    (record,) = ledger.records
    assert (record.cached_tokens, record.cache_write_tokens) == (2_000, 6_000)
    price = PriceTable().lookup("openai/gpt-6.1-sol")
    assert price is not None and price.cache_write is not None and price.cache_write > price.input
    expected = (2_000 * price.input + 2_000 * price.cached_input + 6_000 * price.cache_write
                + 500 * price.output) / 1e6
    assert record.dollars == pytest.approx(expected)
    assert record.dollars > (8_000 * price.input + 2_000 * price.cached_input + 500 * price.output) / 1e6


async def test_claude_5_with_no_limit_configured_gets_room_for_its_default_thinking() -> None:
    """Claude Sonnet 5.5 thinks by default (effort high); the request leaves room for it, so
    the simulated thinking does not eat the answer. 4096 alone, the old default, is cut."""
    answer = Reply(text="agent.click(10, 20)")
    out, ledger, bodies = await _call(AnthropicServer, "anthropic/claude-sonnet-5-5", [answer], module="policy")
    assert out == "agent.click(10, 20)"
    assert bodies[0]["max_tokens"] == ANSWER_TOKENS["policy"] + THINKING_ROOM["high"] and "thinking" not in bodies[0]
    assert ledger.records[0].output_tokens >= SIMULATED_THINKING["high"]  # thinking is billed as output
    cut, _, _ = await _call(AnthropicServer, "anthropic/claude-sonnet-5-5", [answer, answer], module="policy",
                            config=GenerateConfig(max_tokens=2048), retry=RetryPolicy(max_attempts=1))
    assert isinstance(cut, ModelCallError) and cut.reason == "length"


async def test_a_cut_reply_is_retried_larger_even_with_no_limit_configured() -> None:
    """Thinking longer than the role's default room: asked once more with twice the default."""
    long_think = Reply(text="verdict: 1", thinking_tokens=30_000)
    out, ledger, bodies = await _call(AnthropicServer, "anthropic/claude-opus-5-5", [long_think, long_think])
    first = ANSWER_TOKENS["judge"] + THINKING_ROOM["medium"]
    assert out == "verdict: 1" and [b["max_tokens"] for b in bodies] == [first, 2 * first]
    assert ledger.records[0].error is None and ledger.records[0].output_tokens > 2 * 20_000


async def test_the_larger_limit_stays_within_the_model_output_cap() -> None:
    huge = Reply(text="verdict: 1", thinking_tokens=128_000)
    out, ledger, bodies = await _call(OpenAIServer, "openai/gpt-6.1-sol", [huge, huge],
                                      config=GenerateConfig(max_tokens=100_000))
    assert isinstance(out, ModelCallError) and out.reason == "length"
    assert [b["max_completion_tokens"] for b in bodies] == [100_000, 128_000]  # the cap, not 200,000
    assert ledger.records[0].error_kind == "length"


async def test_a_model_that_always_thinks_refuses_thinking_off() -> None:
    """Opus 5.5 cannot switch thinking off: the strict server refuses it as the API does, and
    the adapter never sends it (effort "none" is refused before the call)."""
    out, _, bodies = await _call(AnthropicServer, "anthropic/claude-opus-5-5", [Reply(text="x")],
                                 config=GenerateConfig(reasoning_effort="none"))
    assert isinstance(out, ModelCallError) and out.reason == "unsupported" and bodies == []
    out, _, bodies = await _call(AnthropicServer, "anthropic/claude-opus-5", [Reply(text="x")],
                                 config=GenerateConfig(reasoning_effort="none"))
    assert out == "x" and bodies[0]["thinking"] == {"type": "disabled"}
    # The answer alone fits: no room for thinking is asked when thinking is off.
    assert bodies[0]["max_tokens"] == ANSWER_TOKENS["judge"]


async def test_the_strict_server_refuses_forced_tool_use_while_thinking() -> None:
    client = anthropic.AsyncAnthropic(api_key=KEY, max_retries=0, timeout=30)
    async with AnthropicServer(Script("forced", [Reply(text="x")]), api_key=KEY) as server:
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.base_url, max_retries=0, timeout=30)
        tool = {"name": "answer", "input_schema": {"type": "object", "properties": {}}}
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.messages.create(model="claude-opus-5-5", max_tokens=1000, tools=[tool],
                                         tool_choice={"type": "tool", "name": "answer"},
                                         messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(anthropic.BadRequestError) as off:
            await client.messages.create(model="claude-opus-5-5", max_tokens=1000, thinking={"type": "disabled"},
                                         messages=[{"role": "user", "content": "hi"}])
        await client.close()
    assert "tool_choice forces tool use" in str(info.value) and "thinking.type.disabled" in str(off.value)


async def test_each_retry_and_the_end_of_a_retried_call_are_told_to_the_progress() -> None:
    seen: list[RetryNotice] = []
    with watching_retries(seen.append):
        out, _, bodies = await _call(OpenAIServer, "openai/gpt-6.1-sol",
                                     [Reply(error=500), Reply(error=503), Reply(text="ok")], module="judge")
        quiet, _, _ = await _call(OpenAIServer, "openai/gpt-6.1-sol", [Reply(text="ok")])
    assert out == "ok" and quiet == "ok" and len(bodies) == 3
    assert [(n.kind, n.attempt, n.status) for n in seen] == [("retry", 1, 500), ("retry", 2, 503), ("done", 3, 503)]
    assert len({n.call for n in seen}) == 1 and seen[-1].succeeded  # the call without retries told nothing
    assert seen[0].line().startswith("judge call (openai/gpt-6.1-sol) retrying: server_error (HTTP 500), attempt 1")
    assert "answered after 3 attempts" in seen[-1].line()
