"""The worker over the official SDKs and real loopback HTTP: a format error, a re-ask and
a grounded click, with the screenshot arriving as an image on both wire protocols."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest

from agent_s3 import Click, Grounder, GroundingConfig, Worker, WorkerConfig
from core.llm import ChatModel, Reply, Script
from testing.llm import AnthropicServer, FakeServer, OpenAIServer

KEY = "sk-agent-s3-test"


@pytest.mark.parametrize(
    ("server_cls", "name"),
    [(OpenAIServer, "openai/gpt-4o"), (AnthropicServer, "anthropic/claude-haiku-4-5")],
    ids=["openai", "anthropic"],
)
async def test_step_over_http(
    server_cls: type[FakeServer], name: str, make_png: Callable[..., bytes]
) -> None:
    script = Script(
        "http",
        [
            Reply(text="Let me click."),
            Reply(text="Clicking OK.\n```python\nagent.click('the OK button')\n```"),
            Reply(text="(250, 750)"),
        ],
    )
    png = make_png()
    async with server_cls(script) as server:
        model = ChatModel.from_name(name, base_url=server.base_url, api_key=KEY)
        try:
            worker = Worker(model, WorkerConfig(), Grounder(model, GroundingConfig(space="norm1000")))
            proposal = await worker.step("Press OK", png, (1000, 400))
        finally:
            await model.aclose()
    assert proposal.action == Click(element_description="the OK button")
    assert proposal.points["target"].x == 250 and proposal.points["target"].y == 300
    assert len(proposal.format_errors) == 1
    bodies = [json.dumps(r.body) for r in server.requests]
    assert len(bodies) == 3 and all(r.credential == KEY for r in server.requests)
    encoded = base64.b64encode(png).decode()
    assert all(encoded in body for body in bodies)
    assert "No code block found" in bodies[1] and "the OK button" in bodies[2]
    script.assert_done()
