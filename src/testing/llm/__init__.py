"""Protocol-faithful local servers for OpenAI Chat Completions and Anthropic Messages,
answering from a `Script`, with per-request fault injection. For tests and chaos runs:

    script = Script("s", [Reply(error=429, retry_after=1), Reply(text="ok")])
    async with OpenAIServer(script) as server:
        model = ChatModel.from_name("openai/gpt-4o", base_url=server.base_url, api_key="k")
"""

from .anthropic import AnthropicServer
from .base import FakeServer, SeenRequest, WireError
from .openai import OpenAIServer

__all__ = ["AnthropicServer", "FakeServer", "OpenAIServer", "SeenRequest", "WireError"]
