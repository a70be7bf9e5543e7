"""A critic role's call that fails for good in a way no re-ask can fix (a refusal, a spend
limit) ends the role's attempts at once: never re-asked as a format error, never repeated."""

from __future__ import annotations

import pytest

from core.llm import ChatMessage, ChatModel, Reply, Script
from testing.llm import OpenAIServer
from themis.asking import ask_json
from themis.schemas import VerifierReply

KEY = "sk-themis-final-0123456789"
ASK = [ChatMessage(role="system", content="You verify one milestone."), ChatMessage(role="user", content="step 2")]


@pytest.mark.parametrize(("reply", "kind"), [
    (Reply(finish_reason="refusal", refusal="I can't assess this."), "refusal"),
    (Reply(error=429, code="project_spend_limit_exceeded", message="spend limit"), "spend_limit"),
])
async def test_a_final_failure_ends_the_roles_attempts(reply: Reply, kind: str) -> None:
    async with OpenAIServer(Script("final", [reply, Reply(text="never"), Reply(text="never")]), api_key=KEY) as server:
        model = ChatModel.from_name("openai/gpt-6.1-sol", base_url=server.base_url, api_key=KEY)
        asked = await ask_json(model, ASK, VerifierReply, role="verifier", critic="themis", retries=2)
        await model.aclose()
    assert asked.value is None and len(asked.attempts) == 1 and len(server.requests) == 1
    assert f"({kind})" in (asked.error or "")
    # The structured request asked in the verifier's schema (native structured outputs).
    assert server.requests[0].body["response_format"]["json_schema"]["name"] == "VerifierReply"
