"""Fixtures for the model layer: a local protocol server plus a ChatModel pointed at it,
once per wire protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from core.llm import ChatModel, Script
from core.llm.scripted import Step
from testing.llm import AnthropicServer, FakeServer, OpenAIServer

API_KEY = "sk-test-0123456789abcdef"


@dataclass(frozen=True)
class Wire:
    name: str
    server: type[FakeServer]
    model: str


WIRES = [Wire("openai", OpenAIServer, "openai/gpt-4o"),
         Wire("anthropic", AnthropicServer, "anthropic/claude-haiku-4-5")]

Serve = Callable[..., AbstractAsyncContextManager[tuple[FakeServer, ChatModel]]]


@pytest.fixture
def api_key() -> str:
    return API_KEY


@pytest.fixture(params=WIRES, ids=lambda w: w.name)
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param


@pytest.fixture
def serve(wire: Wire) -> Serve:
    """`async with serve(steps, **model_kwargs) as (server, model)`: the official SDK over
    real HTTP against a local server playing `steps`."""

    @asynccontextmanager
    async def run(steps: list[Step], model: str | None = None, server_key: str | None = None,
                  **kwargs: Any) -> AsyncIterator[tuple[FakeServer, ChatModel]]:
        script = Script(f"{wire.name}-server", steps)
        async with wire.server(script, api_key=server_key) as server:
            chat = ChatModel.from_name(model or wire.model, base_url=server.base_url,
                                       api_key=kwargs.pop("api_key", API_KEY), **kwargs)
            try:
                yield server, chat
            finally:
                await chat.aclose()

    return run
