"""Provider set-up: keys, base URLs, secrets, OpenAI-compatible parameter names, cache
breakpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.llm import (
    ChatMessage,
    ChatModel,
    GenerateConfig,
    Ledger,
    MissingAPIKeyError,
    ModelCallError,
    Recorder,
    Reply,
    Sampling,
    Script,
)
from core.llm.providers.anthropic import to_anthropic
from testing.llm import OpenAIServer

ASK = [ChatMessage(role="user", content="hi")]


@pytest.mark.parametrize(
    ("name", "variable"),
    [
        ("openai/gpt-4o", "OPENAI_API_KEY"),
        ("anthropic/claude-haiku-4-5", "ANTHROPIC_API_KEY"),
        ("gemini/gemini-2.5-pro", "GEMINI_API_KEY"),
        ("openrouter/qwen/qwen3-vl", "OPENROUTER_API_KEY"),
    ],
)
def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, variable: str) -> None:
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(MissingAPIKeyError, match=f"set {variable}"):
        ChatModel.from_name(name)
    monkeypatch.setenv(variable, "from-env")
    model = ChatModel.from_name(name)
    assert model.api.secrets() == ["from-env"]


def test_default_base_urls_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    assert ChatModel.from_name("vllm/Qwen2.5-VL").api.base_url == "http://localhost:8000/v1"
    gemini = ChatModel.from_name("gemini/gemini-2.5-flash", api_key="k")
    assert gemini.api.base_url == "https://generativelanguage.googleapis.com/v1beta/openai/"
    router = ChatModel.from_name("openrouter/anthropic/claude-haiku-4.5", api_key="k",
                                 base_url="http://127.0.0.1:9/v1")
    assert router.api.base_url == "http://127.0.0.1:9/v1" and router.api.model == "anthropic/claude-haiku-4.5"


async def test_keys_stay_out_of_reprs_errors_ledgers_and_recordings(tmp_path: Path) -> None:
    key = "sk-very-secret-key-42"
    script = Script("s", [Reply(error=401, message=f"Incorrect API key provided: {key}"),
                          Reply(text="ok")])
    ledger = Ledger(tmp_path / "ledger.jsonl")
    async with OpenAIServer(script) as server:
        model = ChatModel.from_name("openai/gpt-4o", api_key=key, base_url=server.base_url,
                                    ledger=ledger, recorder=Recorder(tmp_path / "rec.jsonl"))
        with pytest.raises(ModelCallError) as info:
            await model.generate(ASK, module="m")
        await model.generate(ASK, module="m")
        await model.aclose()
    assert key not in str(info.value) and "***" in str(info.value)
    assert key not in repr(model) and key not in repr(model.api)
    assert key not in (tmp_path / "ledger.jsonl").read_text()
    assert key not in (tmp_path / "rec.jsonl").read_text()
    assert all(key not in str(h) for r in server.requests for h in r.headers.values())


@pytest.mark.parametrize(
    ("name", "field", "reasoning"),
    [
        ("vllm/qwen", "max_tokens", ("reasoning_effort", "high")),
        ("openrouter/qwen/qwen3-vl", "max_tokens", ("reasoning", {"effort": "high"})),
        ("gemini/gemini-2.5-flash", "max_tokens", ("reasoning_effort", "high")),
        ("openai/o3", "max_completion_tokens", ("reasoning_effort", "high")),
    ],
)
async def test_openai_compatible_parameter_names(name: str, field: str, reasoning: tuple[str, Any]) -> None:
    # No thinking in this reply: 64 tokens leave none for it, and the test is about names.
    async with OpenAIServer(Script("s", [Reply(text="ok", thinking_tokens=0)]), provider=name.split("/")[0]) as server:
        model = ChatModel.from_name(name, api_key="k", base_url=server.base_url)
        out = await model.generate(ASK, module="m", config=GenerateConfig(max_tokens=64, reasoning_effort="high"))
        await model.aclose()
    body = server.requests[0].body
    assert out.text == "ok" and body[field] == 64 and body[reasoning[0]] == reasoning[1]
    assert body["model"] == name.split("/", 1)[1]


@pytest.mark.parametrize(("name", "top_k"), [("vllm/qwen", 80), ("openrouter/qwen/qwen3-vl", 80),
                                            ("openai/gpt-4o", None), ("gemini/gemini-2.5-flash", None)])
async def test_top_k_reaches_the_servers_that_take_it(name: str, top_k: int | None) -> None:
    """GUI-PRA's top_k 80 is a preference: in the body where the API takes top_k (the strict
    server refuses it elsewhere), beside OpenRouter's reasoning object, never in its place."""
    reasoning = "high" if name.startswith("openrouter/") else None
    config = GenerateConfig(sampling=Sampling.diverse(0.5, 0.9, 80), reasoning_effort=reasoning)
    async with OpenAIServer(Script("s", [Reply(text="ok")]), provider=name.split("/")[0]) as server:
        model = ChatModel.from_name(name, api_key="k", base_url=server.base_url)
        out = await model.generate(ASK, module="m", config=config)
        await model.aclose()
    body = server.requests[0].body
    assert out.text == "ok" and body.get("top_k") == top_k
    if name.startswith("openrouter/"):
        assert body["reasoning"] == {"effort": "high"}


def test_anthropic_breakpoints_are_capped_and_turns_merge() -> None:
    messages = [ChatMessage(role="system", content="rules")]
    messages += [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"t{i}", cache=True)
                 for i in range(6)]
    messages += [ChatMessage(role="user", content="more"), ChatMessage(role="user", content="again")]
    system, turns = to_anthropic(messages)
    marks = [b for t in turns for b in t["content"] if "cache_control" in b]
    assert system[0]["cache_control"] == {"type": "ephemeral"}
    assert [b["text"] for b in marks] == ["t3", "t4", "t5"]  # with the system prompt: four
    assert [t["role"] for t in turns][-2:] == ["assistant", "user"]
    assert [b["text"] for b in turns[-1]["content"]] == ["more", "again"]
