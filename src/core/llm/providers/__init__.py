"""Adapters per wire protocol: OpenAI Chat Completions, Anthropic Messages, and servers
that speak OpenAI's protocol (vLLM, Gemini's and OpenRouter's OpenAI endpoints).
Imported lazily through `core.llm.provider.PROVIDERS`."""

__all__: list[str] = []
