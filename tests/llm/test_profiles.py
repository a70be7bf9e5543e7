"""Capability profiles: resolution from names, shaping of intents into accepted values,
clear errors for explicit values a model refuses, overrides, and replies cut at the limit."""

from __future__ import annotations

from typing import Any

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
    Sampling,
    Script,
    Usage,
)
from core.llm.profiles import (
    OVERRIDES_ENV,
    ProfileError,
    anthropic_thinking,
    check,
    default_anthropic_version,
    resolve,
    sampling_params,
    set_overrides,
)
from core.llm.providers.anthropic import AnthropicAPI
from testing.llm import AnthropicServer, OpenAIServer

ASK = [ChatMessage(role="user", content="next?")]
KEY = "sk-profiles-0123456789"
DIVERSE = GenerateConfig(sampling=Sampling.diverse(0.5, 0.9), seed=3)


def test_the_sdk_version_is_read_from_the_installed_sdk() -> None:
    from anthropic._constants import ANTHROPIC_API_VERSION

    assert default_anthropic_version() == ANTHROPIC_API_VERSION
    assert resolve("anthropic/claude-haiku-4-5").temperature == (
        "none" if ANTHROPIC_API_VERSION >= "2026-10-21" else "any")


@pytest.mark.parametrize(("name", "family", "status"), [
    ("openai/gpt-5", "gpt-5", "deprecated"),
    ("openai/gpt-5-mini-2025-08-07", "gpt-5", "deprecated"),
    ("openai/gpt-5.2", "gpt-5.x", "active"),
    ("openai/gpt-5.2-pro", "gpt-5-pro", "deprecated"),
    ("openai/gpt-6.1-sol", "gpt-6.1-sol", "active"),
    ("openai/gpt-6-sol", "gpt-6-none", "active"),
    ("openai/gpt-6.1-terra", "gpt-6-none", "active"),
    ("openai/gpt-6-astra", "gpt-6", "active"),
    ("openai/gpt-5.1", "gpt-5.1", "deprecated"),
    ("openai/gpt-5.1-mini", "gpt-5.1", "unknown"),
    ("openai/o3", "o-series", "deprecated"),
    # Shut down on 2026-10-23 by the openai SDK's own list: 404 now.
    ("openai/o4-mini", "o-series", "retired"),
    ("openai/o3-mini", "o-series", "retired"),
    ("openai/o1", "o-series", "retired"),
    ("openai/gpt-4.1-nano", "gpt-4.1", "retired"),
    ("openai/gpt-5.2-chat-latest", "gpt-5.x", "retired"),
    ("openai/gpt-4.1-mini", "gpt-4.1", "deprecated"),
    ("openai/gpt-4.5-preview", "retired-openai", "retired"),
    ("openai/gpt-4.7", "openai-deployment", "unknown"),
    ("openai/my-finetune", "openai-deployment", "active"),
    ("anthropic/claude-opus-4-1", "retired-claude", "retired"),
    ("anthropic/claude-3-5-sonnet-20241022", "retired-claude", "retired"),
    ("anthropic/claude-sonnet-4-5-20250929", "claude-sonnet-4.5", "deprecated"),
    ("anthropic/claude-haiku-4-5", "claude-4.5", "active"),
    ("anthropic/claude-sonnet-4-6", "claude-4.6", "active"),
    ("anthropic/claude-opus-4-7", "claude-opus-4.7+", "active"),
    ("anthropic/claude-sonnet-5-5", "claude-5.x", "active"),
    ("anthropic/claude-opus-5", "claude-5.x", "active"),
    ("anthropic/claude-opus-5-5", "claude-opus-5.5", "active"),
    ("anthropic/claude-mythos-preview", "claude-fable", "retired"),
    ("anthropic/claude-fable-5-1", "claude-fable", "active"),
    ("anthropic/claude-x", "claude-unlisted", "unknown"),
    ("gemini/gemini-2.5-flash", "gemini-openai-compat", "active"),
])
def test_names_resolve_to_their_family(name: str, family: str, status: str) -> None:
    profile = resolve(name)
    assert (profile.family, profile.status) == (family, status)
    assert profile.sources and all(profile.sources)


@pytest.mark.parametrize(("name", "version", "expected"), [
    ("openai/gpt-4o", None, {"temperature": 0.5, "top_p": 0.9, "seed": 3}),
    ("openai/gpt-5", None, {"seed": 3}),
    ("openai/gpt-6.1-sol", None, {"seed": 3}),
    ("vllm/ui-tars", None, {"temperature": 0.5, "top_p": 0.9, "seed": 3}),
    ("gemini/gemini-2.5-pro", None, {"temperature": 0.5, "top_p": 0.9}),
    ("anthropic/claude-sonnet-4-5", "2026-10-21", {}),
    ("anthropic/claude-sonnet-4-5", "2023-06-01", {"temperature": 0.5}),  # not both
    ("anthropic/claude-opus-4-7", "2023-06-01", {}),
])
def test_a_diverse_intent_becomes_what_the_model_accepts(name: str, version: str | None,
                                                         expected: dict[str, Any]) -> None:
    assert sampling_params(resolve(name, anthropic_version=version), DIVERSE) == expected


@pytest.mark.parametrize(("name", "version", "thinking", "expected"), [
    ("vllm/ui-tars", None, False, 80),
    ("openrouter/qwen/qwen3-vl", None, False, 80),
    ("anthropic/claude-haiku-4-5", "2023-06-01", False, 80),
    ("anthropic/claude-haiku-4-5", "2023-06-01", True, None),  # no top_k while thinking
    ("anthropic/claude-haiku-4-5", "2026-10-21", False, None),
    ("openai/gpt-4o", None, False, None),
    ("gemini/gemini-2.5-pro", None, False, None),
])
def test_the_papers_top_k_only_where_the_model_takes_it(name: str, version: str | None, thinking: bool,
                                                        expected: int | None) -> None:
    config = GenerateConfig(sampling=Sampling.diverse(0.5, 0.9, 80), seed=3)
    sent = sampling_params(resolve(name, anthropic_version=version), config, thinking=thinking)
    assert sent.get("top_k") == expected


def test_deterministic_is_temperature_zero_only_where_accepted() -> None:
    config = GenerateConfig(sampling=Sampling.deterministic())
    assert sampling_params(resolve("openai/gpt-4.1"), config) == {"temperature": 0.0}
    assert sampling_params(resolve("openai/o3"), config) == {}
    old = resolve("anthropic/claude-haiku-4-5", anthropic_version="2023-06-01")
    assert sampling_params(old, config) == {"temperature": 0.0}
    assert sampling_params(old, config, thinking=True) == {}  # no temperature while thinking


def test_explicit_values_the_model_refuses_are_named_before_the_run() -> None:
    assert check("openai/gpt-4o", GenerateConfig(temperature=0.5, top_p=0.9)) == []
    lines = check("openai/gpt-5", GenerateConfig(temperature=0.5, top_p=0.9, reasoning_effort="xhigh"))
    assert lines == ["openai/gpt-5: temperature 0.5 is not accepted (this model takes only temperature 1)",
                     "openai/gpt-5: top_p 0.9 is not accepted (this model takes no top_p)",
                     "openai/gpt-5: reasoning_effort 'xhigh' is not accepted; use one of minimal, low, medium, high"]
    old = resolve("anthropic/claude-sonnet-4-5", anthropic_version="2023-06-01")
    from core.llm.profiles import problems
    assert problems(old, GenerateConfig(temperature=0.5, top_p=0.9)) == [
        "temperature and top_p are not accepted together; set one of them"]
    assert check("openai/gpt-4.1", GenerateConfig(temperature=3.0)) == [
        "openai/gpt-4.1: temperature 3 is outside 0-2"]
    assert check("anthropic/claude-opus-4-1", GenerateConfig()) == [
        "anthropic/claude-opus-4-1: the model is retired; use claude-sonnet-5-5"]
    assert check("openai/gpt-4.7", GenerateConfig()) == [
        "openai/gpt-4.7: the model is not a model the provider serves; check the model name"]


def test_thinking_follows_the_model() -> None:
    budgeted = resolve("anthropic/claude-haiku-4-5")
    assert anthropic_thinking(budgeted, "high", 1000) == {
        "max_tokens": 1000 + 24576, "thinking": {"type": "enabled", "budget_tokens": 24576}}
    assert anthropic_thinking(budgeted, None, 1000) == {"max_tokens": 1000}
    capped = anthropic_thinking(budgeted, "high", 60000)  # within the 64k output cap, budget below it
    assert capped["max_tokens"] == 64000 and 1024 <= capped["thinking"]["budget_tokens"] < 64000
    adaptive = resolve("anthropic/claude-opus-4-7")
    assert anthropic_thinking(adaptive, "high", 1000) == {
        "max_tokens": 1000, "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}


def test_overrides_apply_per_model_and_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(OVERRIDES_ENV, raising=False)
    set_overrides({"openai/my-proxy": {"temperature": "none", "max_output": 8000}})
    profile = resolve("openai/my-proxy")
    assert profile.temperature == "none" and profile.max_output == 8000
    assert "overridden in config" in profile.sources[-1]
    assert resolve("openai/other").temperature == "any"
    with pytest.raises(ProfileError, match="profile of openai/x: temperature: Input should be"):
        set_overrides({"openai/x": {"temperature": "hot"}})
    with pytest.raises(ProfileError, match="tempreature"):
        set_overrides({"openai/x": {"tempreature": "none"}})
    set_overrides({})
    assert resolve("openai/my-proxy").temperature == "any"


async def test_a_reply_cut_at_the_limit_is_asked_once_more_with_twice_the_limit() -> None:
    ledger = Ledger()
    script = Script("cut", [Reply(text="", finish_reason="length"), Reply(text="done", thinking_tokens=0)])
    async with OpenAIServer(script, api_key=KEY) as server:
        model = ChatModel.from_name("openai/gpt-5.2", base_url=server.base_url, api_key=KEY, ledger=ledger)
        out = await model.generate(ASK, module="policy", config=GenerateConfig(max_tokens=500))
        await model.aclose()
    assert out.text == "done"
    assert [r.body["max_completion_tokens"] for r in server.requests] == [500, 1000]
    (record,) = ledger.records
    assert record.error is None and record.output_tokens == out.usage.output_tokens > 0


async def test_a_reply_cut_twice_is_a_length_error_not_a_format_error() -> None:
    ledger = Ledger()
    script = Script("cut-twice", [Reply(text="partial", finish_reason="length",
                                        usage=Usage(input_tokens=1200, output_tokens=300)),
                                  Reply(text="partial", finish_reason="length",
                                        usage=Usage(input_tokens=1200, output_tokens=600))])
    async with AnthropicServer(script, api_key=KEY) as server:
        model = ChatModel.from_name("anthropic/claude-haiku-4-5", base_url=server.base_url, api_key=KEY,
                                    ledger=ledger)
        with pytest.raises(ModelCallError) as info:
            await model.generate(ASK, module="judge", config=GenerateConfig(max_tokens=300))
        await model.aclose()
    assert info.value.reason == "length" and "cut at the token limit (300, then 600)" in str(info.value)
    assert [r.body["max_tokens"] for r in server.requests] == [300, 600]
    # Both cut replies were billed by the provider: the failed call's record carries their tokens.
    (record,) = ledger.records
    assert record.error and "cut at the token limit" in record.error
    assert (record.input_tokens, record.output_tokens) == (2400, 900)
    price = PriceTable().lookup("anthropic/claude-haiku-4-5")
    assert price is not None
    assert record.dollars == pytest.approx((2400 * price.input + 900 * price.output) / 1e6)


def test_the_notes_closing_list_names_every_family_version_and_constant_of_the_rules() -> None:
    """docs/model-rules.md ends with each rule enforced and its source: it names every family,
    fallback, provider and API version of model_rules.yaml and the strict servers' own limits,
    and each entry it opens with a name is one the rules hold."""
    import re
    from pathlib import Path

    from core.llm.profiles import _rules
    from testing.llm import strict

    note = (Path(__file__).parents[2] / "docs" / "model-rules.md").read_text()
    closing = note.split("## Each rule enforced and its source", 1)[1]
    named = set(re.findall(r"`([^`]+)`", closing))
    rules = _rules()
    known = {*rules["providers"], *rules["anthropic_versions"], "MAX_BREAKPOINTS", "MANY_IMAGES",
             "MANY_IMAGES_SIDE", "max_output", "MIN_THINKING_BUDGET", "THINKING_TOP_P"}
    for spec in rules["providers"].values():
        known |= {family["name"] for family in [*spec.get("families", []), spec["fallback"]]}
    assert known - named == set(), "families, versions or limits the note's closing list leaves out"
    openers = re.findall(r"^- `([^`]+)`", closing, re.M)
    assert openers and set(openers) <= known, set(openers) - known
    assert (strict.MAX_BREAKPOINTS, strict.MANY_IMAGES, strict.MANY_IMAGES_SIDE) == (4, 20, 2000)
    assert "at most 4 `cache_control`" in closing and "above 20 images" in closing and "2000 px" in closing


def test_claude_text_blocks_are_joined_by_newlines() -> None:
    api = AnthropicAPI("claude-haiku-4-5", api_key=KEY)
    message = anthropic.types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "First paragraph."}, {"type": "text", "text": "agent.click(1)"}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 7},
    })
    out = api.parse(message)
    assert out.text == "First paragraph.\nagent.click(1)" and out.finish_reason == "stop"


def test_every_rule_in_the_table_names_its_source() -> None:
    from core.llm.profiles import _rules

    rules = _rules()
    for provider, spec in rules["providers"].items():
        assert str(spec.get("base_source", "")).strip(), provider
        for family in [*spec.get("families", []), spec.get("fallback", {})]:
            assert str(family.get("source", "")).strip(), (provider, family.get("name"))
    assert all(str(v.get("source", "")).strip() for v in rules["anthropic_versions"].values())
