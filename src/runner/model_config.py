"""The settings of one chat model, in every section that names a model (the policy, the
grounding, coding and reflection models, the critic's, the guide's, the narrator and judge).

`runner.models.chat_model` is the one place a `ChatModel` is built from them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from core.llm import GenerateConfig

__all__ = ["JudgeModelConfig", "ModelConfig", "Section"]


class Section(BaseModel):
    """A section of the run configuration."""

    # NaN and infinity pass `gt=0` or slip past comparisons and would disable a timeout or
    # a budget: every number of the run configuration must be finite.
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


class ModelConfig(Section):
    """One chat model: its ``provider/model`` name, endpoint and defaults."""

    model: str = "openai/gpt-6.1-sol"
    """``provider/model``; ``scripted/demo`` is the scripted demo policy (no model at all). The
    default is OpenAI's named successor of gpt-5, which shuts down on 2026-12-11 (OpenAI's
    deprecations page); `agent-s3 models check` shows any model's status."""
    base_url: str | None = None
    """Endpoint of an OpenAI- or Anthropic-compatible server; None uses the provider's."""
    api_key: SecretStr | None = None
    """Key for this model; None reads the provider's variable (e.g. OPENAI_API_KEY)."""
    timeout: float = Field(default=600.0, gt=0)
    """Seconds one attempt of a call may take (a reasoning model may think for minutes)."""
    retry_budget: float = Field(default=600.0, gt=0)
    """Seconds one call may spend in all, attempts and waits between them, before it fails;
    long enough to ride out a provider's rate-limit window."""
    max_connections: int | None = Field(default=None, ge=1)
    """Concurrent calls to this endpoint; None keeps the provider's default."""
    generate: GenerateConfig = Field(default_factory=GenerateConfig)
    """Decoding defaults of every call of this model (each module may override them)."""

    @classmethod
    def named(cls, model: str, base_url: str | None = None, api_key: str | None = None) -> ModelConfig:
        """A model named on the command line, with the defaults of everything else."""
        return cls(model=model, base_url=base_url, api_key=SecretStr(api_key) if api_key else None)


class JudgeModelConfig(ModelConfig):
    """A model that narrates transitions or judges rollouts (``wide.narrator_model``,
    ``wide.judge_model``): a model of its own, so its name is required."""

    model: str
    """``provider/model``."""
