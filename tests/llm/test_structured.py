"""Native structured outputs: one strict schema from a pydantic model, sent the way each
provider takes it through its official SDK, enforced by the strict servers (a schema the
real service refuses is refused here too), answered with conforming JSON."""

from __future__ import annotations

import json
from typing import Any, Literal

import anthropic
import openai
import pytest
from pydantic import BaseModel, Field

from core.llm import ChatMessage, ChatModel, GenerateConfig, ModelCallError, Reply, Script
from core.llm.profiles import set_overrides
from core.llm.structured import ReplyFormat, SchemaError, for_provider, strict_schema
from testing.llm import AnthropicServer, OpenAIServer

KEY = "sk-structured-0123456789"
ASK = [ChatMessage(role="system", content="Verify the milestone."), ChatMessage(role="user", content="step 3?")]


class Cue(BaseModel):
    step: int = Field(ge=-1, description="A step index, -1 for the task as a whole.")
    verdict: Literal["success", "failure", "uncertain"]


class Verdict(BaseModel):
    """A verdict on one milestone."""

    decision: Literal["completed", "not_completed"]
    reason: str = Field(min_length=1)
    evidence: list[Cue] = Field(default_factory=list)
    window: Cue | None = None
    kind: Literal["verdict"] = "verdict"


GOOD = json.dumps({"decision": "completed", "reason": "the file is saved", "kind": "verdict",
                   "evidence": [{"step": 3, "verdict": "success"}], "window": None})
FORMAT = ReplyFormat.of(Verdict)


def test_the_strict_schema_closes_every_object_and_requires_every_field() -> None:
    schema = strict_schema(Verdict)
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["decision", "reason", "evidence", "window", "kind"]
    cue = schema["properties"]["evidence"]["items"]
    assert cue["additionalProperties"] is False and cue["required"] == ["step", "verdict"]
    window = schema["properties"]["window"]["anyOf"]
    assert {"type": "null"} in window and any(v.get("type") == "object" for v in window)
    assert schema["properties"]["kind"]["enum"] == ["verdict"]  # const becomes a one-value enum
    flat = json.dumps(schema)
    assert "$ref" not in flat and "$defs" not in flat and '"title"' not in flat and '"default"' not in flat
    assert FORMAT.name == "Verdict" and FORMAT.description == "A verdict on one milestone."


def test_each_provider_keeps_only_what_its_strict_mode_takes() -> None:
    openai_schema = for_provider(FORMAT.json_schema, "openai_strict")
    reason = openai_schema["properties"]["reason"]
    assert "minLength" not in reason and "minLength: 1" in reason["description"]
    assert openai_schema["properties"]["evidence"]["items"]["properties"]["step"]["minimum"] == -1  # kept
    claude = for_provider(FORMAT.json_schema, "anthropic")  # the anthropic SDK's own transform
    step = claude["properties"]["evidence"]["items"]["properties"]["step"]
    assert "minimum" not in step and "minimum: -1" in step["description"]
    assert for_provider(FORMAT.json_schema, "vllm") == FORMAT.json_schema  # full JSON Schema


def test_a_recursive_contract_has_no_strict_schema() -> None:
    class Node(BaseModel):
        children: list[Node]

    with pytest.raises(SchemaError, match="recursive"):
        strict_schema(Node)

    class Loose(BaseModel):
        arguments: dict[str, str]

    with pytest.raises(SchemaError, match="free-form object"):
        strict_schema(Loose)  # closing it would leave it always empty


@pytest.mark.parametrize(("server_cls", "name"), [
    (OpenAIServer, "openai/gpt-6.1-sol"),
    (OpenAIServer, "openai/gpt-4.1"),
    (AnthropicServer, "anthropic/claude-sonnet-5-5"),
    (AnthropicServer, "anthropic/claude-opus-5-5"),
    (AnthropicServer, "anthropic/claude-haiku-4-5"),
    (OpenAIServer, "vllm/qwen3-vl"),
    (OpenAIServer, "gemini/gemini-3.5-flash"),
    (OpenAIServer, "openrouter/qwen/qwen3-vl"),
])
async def test_a_structured_request_is_accepted_and_answered_in_its_schema(server_cls: type, name: str) -> None:
    provider = name.split("/")[0]
    async with server_cls(Script(name, [Reply(text=GOOD)]), api_key=KEY, provider=provider) as server:
        model = ChatModel.from_name(name, base_url=server.base_url, api_key=KEY)
        out = await model.generate(ASK, module="critic", config=GenerateConfig(reply_format=FORMAT))
        await model.aclose()
    assert server.refused == [] and server.nonconforming == [] and model.structured_outputs
    assert out.structured and Verdict.model_validate_json(out.text).decision == "completed"
    body = server.requests[0].body
    if provider in ("openai", "openrouter"):
        spec = body["response_format"]["json_schema"]
        assert body["response_format"]["type"] == "json_schema" and spec["strict"] is True and spec["name"] == "Verdict"
    if provider == "openrouter":
        assert body["provider"] == {"require_parameters": True}
    if provider == "gemini":
        assert "strict" not in body["response_format"]["json_schema"]
    if provider == "vllm":
        assert body["structured_outputs"]["json"] == FORMAT.json_schema and "response_format" not in body
    if provider == "anthropic":
        assert body["output_config"]["format"]["type"] == "json_schema" and "tools" not in body


async def test_a_forced_tool_where_configured_and_never_while_thinking() -> None:
    set_overrides({"anthropic/claude-haiku-4-5": {"structured": "anthropic_tool"},
                   "anthropic/claude-opus-5-5": {"structured": "anthropic_tool"}})
    try:
        async with AnthropicServer(Script("tool", [Reply(text=GOOD)]), api_key=KEY) as server:
            model = ChatModel.from_name("anthropic/claude-haiku-4-5", base_url=server.base_url, api_key=KEY)
            out = await model.generate(ASK, module="critic", config=GenerateConfig(reply_format=FORMAT))
            thinking = ChatModel.from_name("anthropic/claude-opus-5-5", base_url=server.base_url, api_key=KEY)
            with pytest.raises(ModelCallError) as info:
                await thinking.generate(ASK, module="critic", config=GenerateConfig(reply_format=FORMAT))
            await model.aclose()
            await thinking.aclose()
    finally:
        set_overrides({})
    body = server.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "Verdict"} and body["tools"][0]["strict"] is True
    assert json.loads(out.text) == json.loads(GOOD) and out.structured
    assert info.value.reason == "unsupported" and "forced tool" in str(info.value) and len(server.requests) == 1


async def test_a_reply_outside_the_schema_is_a_broken_script_said_loudly() -> None:
    async with OpenAIServer(Script("loose", [Reply(text="<answer>1</answer>")]), api_key=KEY) as server:
        model = ChatModel.from_name("openai/gpt-6.1-sol", base_url=server.base_url, api_key=KEY)
        with pytest.raises(ModelCallError, match="does not conform"):
            await model.generate(ASK, module="critic", config=GenerateConfig(reply_format=FORMAT))
        await model.aclose()
    assert server.nonconforming and "not JSON" in server.nonconforming[0]
    with pytest.raises(Exception, match="does not conform"):
        server.script.assert_done()


async def test_a_model_without_structured_outputs_gets_free_text() -> None:
    set_overrides({"vllm/llama": {"structured": "none"}})
    try:
        async with OpenAIServer(Script("free", [Reply(text="decision: completed")]), provider="vllm") as server:
            model = ChatModel.from_name("vllm/llama", base_url=server.base_url)
            out = await model.generate(ASK, module="critic", config=GenerateConfig(reply_format=FORMAT))
            await model.aclose()
        assert not model.structured_outputs
    finally:
        set_overrides({})
    body = server.requests[0].body
    assert not out.structured and out.text == "decision: completed"
    assert "structured_outputs" not in body and "response_format" not in body


def _object(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _nested(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = _object(a=node)
    return node


#: Schemas the real services refuse: (protocol, model, where the schema goes, schema, what the 400 says).
REFUSED: list[tuple[str, str, str, dict[str, Any], str]] = [
    ("openai", "gpt-6.1-sol", "strict", {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
     "'additionalProperties' is required to be supplied and to be false"),
    ("openai", "gpt-6.1-sol", "strict", {**_object(a={"type": "string"}, b={"type": "integer"}), "required": ["a"]},
     "Missing 'b'"),
    ("openai", "gpt-6.1-sol", "strict", _object(a={"type": "string", "minLength": 1}), "'minLength' is not permitted"),
    ("openai", "gpt-6.1-sol", "strict", _object(a={"type": "string", "default": "x"}), "'default' is not permitted"),
    ("openai", "gpt-6.1-sol", "strict", _object(a={"allOf": [{"type": "string"}]}), "'allOf' is not permitted"),
    ("openai", "gpt-6.1-sol", "strict", {"anyOf": [_object(a={"type": "string"})]}, "type: \"object\""),
    ("openai", "gpt-6.1-sol", "strict", _object(a={"type": "string", "format": "uri"}), "format 'uri'"),
    ("openai", "gpt-6.1-sol", "strict", _nested(11), "more than 10 levels"),
    ("openai", "gpt-6.1-sol", "name:bad name!", _object(a={"type": "string"}), "json_schema.name"),
    ("anthropic", "claude-sonnet-5-5", "format", _object(a={"type": "integer", "minimum": 0}), "'minimum' is not supported"),
    ("anthropic", "claude-sonnet-5-5", "format", _object(a={"type": "string", "maxLength": 9}),
     "'maxLength' is not supported"),
    ("anthropic", "claude-sonnet-5-5", "format", _object(a={"type": "array", "items": {"type": "string"}, "minItems": 2}),
     "minItems must be 0 or 1"),
    ("anthropic", "claude-sonnet-5-5", "format", {"type": "object", "properties": {"a": {"type": "string"}}},
     "additionalProperties must be set to false"),
    ("anthropic", "claude-sonnet-5-5", "format", _object(a={"oneOf": [{"type": "string"}, {"type": "integer"}]}),
     "'oneOf' is not supported"),
    ("anthropic", "claude-sonnet-5-5", "format", {**_object(**{f"p{i}": {"type": "string"} for i in range(25)}),
                                                 "required": []}, "25 optional parameters"),
    ("anthropic", "claude-sonnet-5-5", "format",
     _object(**{f"u{i}": {"anyOf": [{"type": "string"}, {"type": "null"}]} for i in range(17)}),
     "17 parameters with union types"),
    ("anthropic", "claude-sonnet-5-5", "prefill", _object(a={"type": "string"}), "prefilled assistant turn"),
    ("vllm", "qwen3-vl", "two", _object(a={"type": "string"}), "only use one kind of constraints"),
    ("vllm", "qwen3-vl", "json", {"type": "nope"}, "invalid JSON schema"),
]


@pytest.mark.parametrize(("protocol", "model", "where", "schema", "says"), REFUSED,
                         ids=[f"{r[0]}-{r[4][:40]}" for r in REFUSED])
async def test_a_schema_the_real_service_refuses_is_refused(protocol: str, model: str, where: str,
                                                           schema: dict[str, Any], says: str) -> None:
    script = Script(f"refuse-{protocol}", [Reply(text="{}")])
    if protocol == "anthropic":
        async with AnthropicServer(script, api_key=KEY) as server:
            client = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.base_url, max_retries=0, timeout=30)
            turns: list[Any] = [{"role": "user", "content": "hi"}]
            if where == "prefill":
                turns.append({"role": "assistant", "content": "{"})
            with pytest.raises(anthropic.BadRequestError) as info:
                await client.messages.create(model=model, max_tokens=20000, messages=turns,
                                             output_config={"format": {"type": "json_schema", "schema": schema}})
            await client.close()
    else:
        async with OpenAIServer(script, api_key=KEY, provider="vllm" if protocol == "vllm" else "openai") as server:
            client = openai.AsyncOpenAI(api_key=KEY, base_url=server.base_url, max_retries=0)
            kwargs: dict[str, Any]
            if protocol == "vllm":
                constraint = {"json": schema, "regex": "a+"} if where == "two" else {"json": schema}
                kwargs = {"extra_body": {"structured_outputs": constraint}}
            else:
                name = where.split(":", 1)[1] if where.startswith("name:") else "Reply"
                kwargs = {"response_format": {"type": "json_schema",
                                              "json_schema": {"name": name, "strict": True, "schema": schema}}}
            with pytest.raises(openai.BadRequestError) as info:
                await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}],
                                                     **kwargs)
            await client.close()
    assert info.value.status_code == 400 and says in str(info.value)
    assert server.script.requests == []  # refused before any reply was taken


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_the_raw_pydantic_schema_is_refused_where_the_strict_one_passes(protocol: str) -> None:
    """Sending `model_json_schema()` as is (titles, defaults, optional fields, open objects) is
    what the real services refuse; the strict schema of the same model is accepted."""
    raw = Verdict.model_json_schema()
    script = Script(f"raw-{protocol}", [Reply(text=GOOD)])
    if protocol == "openai":
        async with OpenAIServer(script, api_key=KEY) as server:
            client = openai.AsyncOpenAI(api_key=KEY, base_url=server.base_url, max_retries=0)
            with pytest.raises(openai.BadRequestError):
                await client.chat.completions.create(
                    model="gpt-6.1-sol", messages=[{"role": "user", "content": "hi"}],
                    response_format={"type": "json_schema", "json_schema": {"name": "V", "strict": True, "schema": raw}})
            await client.close()
    else:
        async with AnthropicServer(script, api_key=KEY) as server:
            client = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.base_url, max_retries=0, timeout=30)
            with pytest.raises(anthropic.BadRequestError):
                await client.messages.create(model="claude-sonnet-5-5", max_tokens=20000,
                                             messages=[{"role": "user", "content": "hi"}],
                                             output_config={"format": {"type": "json_schema", "schema": raw}})
            await client.close()
    assert len(server.refused) == 1 and server.script.requests == []
