"""Servers that speak OpenAI's Chat Completions protocol: vLLM, Gemini's and OpenRouter's
OpenAI endpoints. Each differs only in default base URL and key variable (what each\naccepts is its profile in `core.llm.model_rules.yaml`);
a base URL given per model (or in the `*_BASE_URL` variable) wins over the default."""

from __future__ import annotations

from typing import Any

from ..structured import ReplyFormat
from .openai import OpenAIAPI

__all__ = ["VLLMAPI", "GeminiAPI", "OpenRouterAPI"]


class VLLMAPI(OpenAIAPI):
    """A vLLM (or any self-hosted OpenAI-compatible) server; a key is optional."""

    provider = "vllm"
    default_max_connections = 64
    key_variable = "VLLM_API_KEY"
    key_required = False
    base_url_variable = "VLLM_BASE_URL"
    default_base_url = "http://localhost:8000/v1"


class GeminiAPI(OpenAIAPI):
    provider = "gemini"
    key_variable = "GEMINI_API_KEY"
    base_url_variable = "GEMINI_BASE_URL"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta/openai/"


class OpenRouterAPI(OpenAIAPI):
    provider = "openrouter"
    key_variable = "OPENROUTER_API_KEY"
    base_url_variable = "OPENROUTER_BASE_URL"
    default_base_url = "https://openrouter.ai/api/v1"

    def add_reasoning(self, params: dict[str, Any], effort: str) -> None:
        # OpenRouter normalises reasoning settings under one object across its providers.
        params.setdefault("extra_body", {})["reasoning"] = {"effort": effort}

    def add_format(self, params: dict[str, Any], fmt: ReplyFormat, mechanism: str) -> None:
        super().add_format(params, fmt, mechanism)
        # Route only to upstream providers that honour the schema, never to one that ignores it.
        params.setdefault("extra_body", {}).setdefault("provider", {})["require_parameters"] = True
