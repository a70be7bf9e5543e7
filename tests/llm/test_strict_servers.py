"""The strict local servers refuse what the real services refuse, and the adapters' requests
pass them: every request issue 13 found refused (corpus/refused_requests.yaml) is refused
over HTTP through the official SDKs, while the same intents sent through `ChatModel` are
accepted for every model family."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import yaml

from core.llm import (
    ChatMessage,
    ChatModel,
    GenerateConfig,
    ImagePart,
    Ledger,
    ModelCallError,
    Reply,
    Sampling,
    Script,
)
from testing.llm import AnthropicServer, FakeServer, OpenAIServer

CASES = yaml.safe_load((Path(__file__).parent / "corpus" / "refused_requests.yaml").read_text())
KEY = "sk-strict-0123456789"
ASK = [ChatMessage(role="system", content="Operate the desktop."), ChatMessage(role="user", content="next?")]


def png(width: int, height: int) -> bytes:
    """A PNG whose header says width x height (the servers read only the header)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + header
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(header)) + chunk
            + struct.pack(">I", zlib.crc32(chunk)) + b"\x00" * 16)


def _images(case: dict[str, Any]) -> list[str]:
    """Base64 PNGs of the case: `images` of them (1 when only a size is given), `image_side`
    px wide, each padded to `image_bytes` when given."""
    count = case.get("images", 1 if case.get("image_side") or case.get("image_bytes") else 0)
    data = png(case.get("image_side", 100), 100)
    data += b"\x00" * max(0, case.get("image_bytes", 0) - len(data))
    return [base64.b64encode(data).decode()] * count


async def _send_raw(case: dict[str, Any], server: FakeServer) -> None:
    extra = dict(case.get("extra") or {})
    if case["protocol"] == "openai":
        client = openai.AsyncOpenAI(api_key=KEY, base_url=server.base_url, max_retries=0)
        parts: list[dict[str, Any]] = [{"type": "text", "text": "hi"}] + [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}} for b64 in _images(case)]
        try:
            await client.chat.completions.create(model=case["model"], messages=[{"role": "user", "content": parts}],
                                                 **extra)
        finally:
            await client.close()
        return
    headers = {"anthropic-version": case["version"]} if case.get("version") else None
    client_a = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.base_url, max_retries=0,
                                        default_headers=headers)
    content: list[dict[str, Any]] = [{"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}}
                                     for i in range(case.get("breakpoints", 0))] or [{"type": "text", "text": "hi"}]
    content += [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}}
                for b64 in _images(case)]
    # An explicit timeout (the adapter sets one on its client): without, the SDK itself refuses a
    # large max_tokens before sending it.
    kwargs: dict[str, Any] = {"max_tokens": extra.pop("max_tokens", 256), "timeout": 30}
    if "thinking" in extra:
        kwargs["thinking"] = extra.pop("thinking")
    try:
        await client_a.messages.create(model=case["model"], messages=[{"role": "user", "content": content}],
                                       extra_body=extra or None, **kwargs)
    finally:
        await client_a.close()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
async def test_issue_13_requests_are_refused_like_the_real_service(case: dict[str, Any]) -> None:
    server_cls = OpenAIServer if case["protocol"] == "openai" else AnthropicServer
    async with server_cls(Script(case["id"], [Reply(text="never")]), api_key=KEY) as server:
        error_cls = openai.APIStatusError if case["protocol"] == "openai" else anthropic.APIStatusError
        with pytest.raises(error_cls) as info:
            await _send_raw(case, server)
    assert info.value.status_code == case["status"]
    body = info.value.body
    assert isinstance(body, dict)
    error = body.get("error", body) if case["protocol"] == "openai" else body["error"]
    if case["protocol"] == "anthropic":
        assert body["type"] == "error"
    assert error["type"] == case["type"] and case["says"] in error["message"]
    if "code" in case:
        assert error["code"] == case["code"]
    if "param" in case:
        assert error["param"] == case["param"]
    assert server.script.requests == []  # refused before any reply was taken


def _sends(case: dict[str, Any], *names: str) -> bool:
    return bool(set(case.get("extra") or {}) & set(names))


#: Each refusal issue 13 lists, as a test of a corpus case: the corpus must hold one for each.
ISSUE_13_REFUSALS = {
    "Claude sampling under the SDK's API version": lambda c: c["protocol"] == "anthropic" and not c.get("version")
    and _sends(c, "temperature", "top_p", "top_k"),
    "Sonnet 4.5 temperature with top_p on the old version": lambda c: c["model"] == "claude-sonnet-4-5"
    and c.get("version") == "2023-06-01" and _sends(c, "temperature") and _sends(c, "top_p"),
    "Haiku 4.5 temperature with top_p on the old version": lambda c: c["model"] == "claude-haiku-4-5"
    and c.get("version") == "2023-06-01" and _sends(c, "temperature") and _sends(c, "top_p"),
    "Opus 4.7+ temperature": lambda c: c["model"] == "claude-opus-4-7" and c.get("version") and _sends(c, "temperature"),
    "Opus 4.7+ top_p": lambda c: c["model"] == "claude-opus-4-7" and c.get("version") and _sends(c, "top_p"),
    "Opus 4.7+ top_k": lambda c: c["model"] == "claude-opus-4-7" and c.get("version") and _sends(c, "top_k"),
    "GPT-5 temperature other than 1": lambda c: c["model"].startswith("gpt-5")
    and (c.get("extra") or {}).get("temperature", 1) != 1,
    "GPT-5 top_p": lambda c: c["model"].startswith("gpt-5") and _sends(c, "top_p"),
    "o-series temperature other than 1": lambda c: c["model"].startswith("o")
    and (c.get("extra") or {}).get("temperature", 1) != 1,
    "OpenAI retired model 404": lambda c: c["protocol"] == "openai" and c["status"] == 404 and c.get("code") == "model_not_found",
    "Claude retired model 404": lambda c: c["protocol"] == "anthropic" and c["status"] == 404,
    "thinking budget below 1024": lambda c: "1024" in c["says"],
    "thinking budget not below max_tokens": lambda c: "thinking.budget_tokens" in c["says"],
    "budget thinking on an adaptive-only model": lambda c: "adaptive" in c["says"],
    "sampling while thinking": lambda c: _sends(c, "thinking") and _sends(c, "temperature", "top_p", "top_k"),
    "more than 4 cache breakpoints": lambda c: c.get("breakpoints", 0) > 4,
    "Claude image count": lambda c: c["protocol"] == "anthropic" and c.get("images", 0) > 100,
    "Claude image side": lambda c: c["protocol"] == "anthropic" and c.get("image_side", 0) > 8000,
    "Claude image side above 20 images": lambda c: c.get("images", 0) > 20 and 2000 < c.get("image_side", 0) <= 8000,
    "Claude image bytes": lambda c: c.get("image_bytes", 0) > 5 * 1024 * 1024,
    "OpenAI image count": lambda c: c["protocol"] == "openai" and c.get("images", 0) > 500,
    "max_tokens on a reasoning model": lambda c: c["protocol"] == "openai" and _sends(c, "max_tokens"),
    "max_tokens above the output cap": lambda c: c["protocol"] == "anthropic" and "maximum allowed number" in c["says"],
    "reasoning_effort value the model lacks": lambda c: c.get("param") == "reasoning_effort"
    and c.get("code") == "unsupported_value",
    "reasoning_effort on a model without reasoning": lambda c: c.get("param") == "reasoning_effort"
    and c.get("code") == "unsupported_parameter",
}


@pytest.mark.parametrize("refusal", ISSUE_13_REFUSALS)
def test_the_corpus_has_a_case_for_each_refusal_of_issue_13(refusal: str) -> None:
    assert any(ISSUE_13_REFUSALS[refusal](case) for case in CASES), f"no case in refused_requests.yaml for {refusal}"


#: The intents the callers of issue 13 now state, instead of the values that were refused.
INTENTS = {
    "gprm-candidates": GenerateConfig(sampling=Sampling.diverse(0.5, 0.9, 80), seed=3),
    "scorer-and-critic": GenerateConfig(sampling=Sampling.deterministic()),
    "wide-rollout": GenerateConfig(sampling=Sampling.diverse(1.0), seed=11),
    "reasoning-low": GenerateConfig(sampling=Sampling.diverse(), reasoning_effort="low", max_tokens=4000),
}
MODELS = ["openai/gpt-5", "openai/gpt-5-mini", "openai/gpt-5.2", "openai/gpt-6.1-sol", "openai/o3",
          "anthropic/claude-sonnet-4-5", "anthropic/claude-haiku-4-5", "anthropic/claude-opus-4-5",
          "anthropic/claude-sonnet-4-6", "anthropic/claude-opus-4-7", "anthropic/claude-opus-5-5",
          "anthropic/claude-sonnet-5-5", "anthropic/claude-fable-5-1"]


@pytest.mark.parametrize("name", MODELS)
async def test_the_adapters_requests_are_accepted(name: str) -> None:
    provider = name.split("/")[0]
    server_cls = OpenAIServer if provider == "openai" else AnthropicServer
    replies = [Reply(text=f"ok {i}") for i in range(len(INTENTS))]
    async with server_cls(Script(name, replies), api_key=KEY) as server:
        model = ChatModel.from_name(name, base_url=server.base_url, api_key=KEY)
        try:
            for config in INTENTS.values():
                assert (await model.generate(ASK, module="m", config=config)).text.startswith("ok")
        finally:
            await model.aclose()
    assert server.refused == [] and len(server.requests) == len(INTENTS)
    bodies = [r.body for r in server.requests]
    if name in ("openai/gpt-5", "openai/o3", "anthropic/claude-sonnet-4-5"):
        assert all("temperature" not in b and "top_p" not in b for b in bodies)


async def test_a_model_that_takes_sampling_gets_the_intended_values() -> None:
    async with OpenAIServer(Script("4o", [Reply(text="a"), Reply(text="b")]), api_key=KEY) as server:
        model = ChatModel.from_name("openai/gpt-4.1", base_url=server.base_url, api_key=KEY)
        await model.generate(ASK, module="m", config=INTENTS["gprm-candidates"])
        await model.generate(ASK, module="m", config=INTENTS["scorer-and-critic"])
        await model.aclose()
    first, second = (r.body for r in server.requests)
    assert (first["temperature"], first["top_p"], first["seed"]) == (0.5, 0.9, 3) and "top_k" not in first
    assert second["temperature"] == 0.0 and "top_p" not in second


async def test_an_explicit_value_the_model_refuses_never_reaches_the_wire() -> None:
    ledger = Ledger()
    async with OpenAIServer(Script("explicit", [Reply(text="x")]), api_key=KEY) as server:
        model = ChatModel.from_name("openai/gpt-5", base_url=server.base_url, api_key=KEY, ledger=ledger)
        with pytest.raises(ModelCallError) as info:
            await model.generate(ASK, module="guide", config=GenerateConfig(temperature=0.5))
        await model.aclose()
    assert info.value.reason == "unsupported" and info.value.retries == 0
    assert "temperature 0.5 is not accepted (this model takes only temperature 1)" in str(info.value)
    assert server.requests == [] and ledger.records[0].error


async def test_a_retired_model_is_named_with_its_replacement_before_any_request() -> None:
    async with AnthropicServer(Script("retired", []), api_key=KEY) as server:
        model = ChatModel.from_name("anthropic/claude-opus-4-1", base_url=server.base_url, api_key=KEY)
        with pytest.raises(ModelCallError, match="the model is retired; use claude-"):
            await model.generate(ASK, module="m")
        await model.aclose()
    assert server.requests == []


async def test_too_many_images_for_claude_are_refused() -> None:
    image = ImagePart(data=png(2001, 100))
    many = [ChatMessage(role="user", content=[image] * 21)]
    async with AnthropicServer(Script("imgs", [Reply(text="x")]), api_key=KEY) as server:
        model = ChatModel.from_name("anthropic/claude-haiku-4-5", base_url=server.base_url, api_key=KEY)
        with pytest.raises(ModelCallError, match="exceed max allowed size: 2000"):
            await model.generate(many, module="m")
        await model.aclose()
    assert len(server.refused) == 1
