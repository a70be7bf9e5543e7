"""Provider-neutral chat messages, generation settings and outputs.

Every room builds prompts from these and receives `ModelOutput`; only provider adapters
know a wire format.
"""

from __future__ import annotations

import base64
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .structured import ReplyFormat

__all__ = [
    "ChatMessage",
    "GenerateConfig",
    "ImagePart",
    "ModelOutput",
    "Part",
    "Sampling",
    "TextPart",
    "Usage",
]


class TextPart(BaseModel):
    model_config = ConfigDict(frozen=True)
    type: Literal["text"] = "text"
    text: str


class ImagePart(BaseModel):
    """An image sent inline; `data` is the encoded file (PNG unless `media_type` says)."""

    model_config = ConfigDict(frozen=True)
    type: Literal["image"] = "image"
    data: bytes = Field(repr=False)
    media_type: str = "image/png"
    #: OpenAI's detail hint; ignored by providers without one.
    detail: Literal["auto", "low", "high"] = "auto"

    def b64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


Part = TextPart | ImagePart


class ChatMessage(BaseModel):
    model_config = ConfigDict(frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str | list[Part]
    #: Marks the end of a stable prefix worth caching (Anthropic cache breakpoint).
    cache: bool = False

    def parts(self) -> list[Part]:
        return [TextPart(text=self.content)] if isinstance(self.content, str) else list(self.content)

    def text(self) -> str:
        return "".join(p.text for p in self.parts() if isinstance(p, TextPart))


class Sampling(BaseModel):
    """What a caller needs from sampling, not how: the adapter turns it into what the
    model accepts (`core.llm.profiles`). `temperature`/`top_p` are preferences used only
    where the model takes them; a model without a temperature samples by its own default.

    - deterministic: a scorer, router or critic (temperature 0 where accepted);
    - diverse: candidates and wide rollouts (temperature 1, or the preference, where accepted);
    - default: the model's own sampling.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    intent: Literal["default", "deterministic", "diverse"] = "default"
    """What the caller needs: the model's own sampling, deterministic, or diverse."""
    temperature: float | None = Field(default=None, ge=0)
    """Preferred temperature, sent only where the model takes one."""
    top_p: float | None = Field(default=None, gt=0, le=1)
    """Preferred top_p, sent only where the model takes it."""
    top_k: int | None = Field(default=None, ge=1)
    """Sent only to models whose API takes top_k (`model_rules.yaml`), never while thinking."""

    @classmethod
    def deterministic(cls) -> Sampling:
        return cls(intent="deterministic")

    @classmethod
    def diverse(cls, temperature: float | None = None, top_p: float | None = None,
                top_k: int | None = None) -> Sampling:
        return cls(intent="diverse", temperature=temperature, top_p=top_p, top_k=top_k)


class GenerateConfig(BaseModel):
    """Decoding settings; None means the provider's default.

    `temperature` and `top_p` are values a user set explicitly: a model that cannot take
    them is an error before the run. Code states intent in `sampling` instead."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)
    temperature: float | None = None
    """Temperature; a model that takes none refuses the run before it starts."""
    top_p: float | None = None
    """Nucleus sampling mass; a model that takes none refuses the run before it starts."""
    sampling: Sampling | None = None
    """The sampling intent the modules set in code (leave it unset in a run file)."""
    seed: int | None = None
    """Decoding seed, sent to providers that honour one."""
    max_tokens: int | None = None
    """Output tokens at most; None leaves room for the model's thinking (`core.llm.limits`)."""
    reasoning_effort: str | None = None
    """For reasoning models ("minimal", "low", "medium", "high"); mapped per provider."""
    stop: list[str] | None = None
    """Strings that end the reply."""
    reply_format: ReplyFormat | None = None
    """Ask for a reply in this JSON schema, natively where the model's profile has a way
    (`core.llm.structured`); a model without one gets free text, read by the caller's parser.
    Set by the modules that read structured replies, not in a run file."""

    @classmethod
    def deterministic(cls, **settings: object) -> GenerateConfig:
        """Settings whose sampling intent is deterministic (a scorer, router or critic)."""
        return cls.model_validate({**settings, "sampling": Sampling.deterministic()})

    @classmethod
    def diverse(cls, temperature: float | None = None, top_p: float | None = None, top_k: int | None = None,
                **settings: object) -> GenerateConfig:
        """Settings whose sampling intent is diverse, preferring these values where accepted."""
        return cls.model_validate({**settings, "sampling": Sampling.diverse(temperature, top_p, top_k)})

    def merged(self, other: GenerateConfig | None) -> GenerateConfig:
        """Settings of `other` that are set win over ours."""
        if other is None:
            return self
        mine = self.model_dump()
        mine.update({k: v for k, v in other.model_dump().items() if v is not None})
        return GenerateConfig(**mine)


class Usage(BaseModel):
    """Token counts of one call. `input_tokens` counts every prompt token; `cached_tokens`
    and `cache_write_tokens` are the parts of it read from / written to the prompt cache."""

    input_tokens: int = 0
    output_tokens: int = 0
    #: Input tokens served from the provider's prompt cache (priced separately).
    cached_tokens: int = 0
    #: Input tokens written to the prompt cache (Anthropic bills these at a premium).
    cache_write_tokens: int = 0
    #: True when the counts are an estimate (the scripted provider), not the provider's.
    estimated: bool = False


class ModelOutput(BaseModel):
    text: str
    model: str
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    #: The response's rate-limit headers (``x-ratelimit-*``, ``anthropic-ratelimit-*``,
    #: ``retry-after``), which the run's shared rate budget learns from (`core.llm.rate_budget`).
    rate_headers: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)
    #: True when the reply was constrained to the request's `reply_format` by the provider:
    #: its text is one JSON value in that schema.
    structured: bool = False
