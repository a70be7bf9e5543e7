"""Configuration of the worker, its grounding and its coding agent (pydantic, so runs can
load them from YAML and write them into `config.json`, secrets redacted)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from core.llm import GenerateConfig
from core.protocols import Platform

__all__ = ["CodeAgentConfig", "EnvironmentFacts", "GroundingConfig", "WorkerConfig"]


class EnvironmentFacts(BaseModel):
    """What the agent is told about the machine it drives; rendered into the prompts."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    user_name: str | None = None
    """The account the desktop runs as."""
    password: SecretStr | None = None
    """The account's password, shown to the model only where `sudo` needs it."""
    sudo: Literal["unavailable", "passwordless", "with_password"] = "unavailable"
    """How administrator commands may be run."""
    home: str | None = None
    """The home folder, when the agent should know it."""
    notes: list[str] = Field(default_factory=list)
    """Further facts, one sentence each (e.g. which applications are installed)."""

    def password_text(self) -> str | None:
        return self.password.get_secret_value() if self.password else None


class GroundingConfig(BaseModel):
    """How element descriptions become screen points."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    style: Literal["policy", "uitars"] = "policy"
    """"policy": ask a general model (often the policy's own) for a point with an instruction;
    "uitars": the screenshot then a bare query, as UI-TARS-style grounding models expect."""
    space: Literal["profile", "pixels", "norm1000", "norm100", "yx1000", "custom"] = "profile"
    """Units of the answer: as the grounding model's profile says (`core.llm.vision`), pixels
    of the screenshot as sent, 0-1000 or 0-100 per axis, Gemini's y-first 0-1000, or
    `width`x`height`. Whatever the units, the screenshot is sent at the largest size the model
    sees unshrunk (its profile's vision rules) and the prompt states that size."""
    width: int | None = Field(default=None, gt=0)
    """The grounding model's output width when `space` is "custom" (e.g. 1920 for UI-TARS-1.5-7B)."""
    height: int | None = Field(default=None, gt=0)
    """The grounding model's output height when `space` is "custom"."""
    generate: GenerateConfig = GenerateConfig()
    """Decoding settings of grounding calls. Provider defaults unless set: reasoning models
    reject temperature 0 and spend small token limits on reasoning; a UI-TARS endpoint is
    usually given temperature 0 here."""
    tesseract_psm: int = Field(default=6, ge=0, le=13)
    """Tesseract page segmentation mode tried first for text spans (sparse text, 11, second)."""

    @model_validator(mode="after")
    def _custom_has_size(self) -> GroundingConfig:
        if self.space == "custom" and not (self.width and self.height):
            raise ValueError("grounding.space 'custom' needs grounding.width and grounding.height")
        return self


class CodeAgentConfig(BaseModel):
    """The coding agent's bounded loop."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    budget: int = Field(default=20, ge=1, le=100)
    """Inner steps before the loop stops with BUDGET_EXHAUSTED."""
    output_limit: int = Field(default=4000, ge=200)
    """Characters of stdout and of stderr kept per step (head and tail)."""
    exec_timeout: float = Field(default=60.0, gt=0)
    """Seconds one code block may run."""
    generate: GenerateConfig = GenerateConfig()
    """Decoding settings of the coding agent and its summarizer."""


class WorkerConfig(BaseModel):
    """The flat worker policy."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    platform: Platform = "ubuntu"
    """Selects prompts, key names and how applications are opened and switched."""
    facts: EnvironmentFacts = Field(default_factory=EnvironmentFacts)
    reflection: bool = True
    """Reflect on the trajectory before each step (after the first)."""
    history_screenshots: int = Field(default=2, ge=0, le=10)
    """Earlier screenshots sent besides the current one."""
    history_steps: int = Field(default=40, ge=1)
    """Past steps kept as text; older ones are counted, not shown."""
    history_thought_chars: int = Field(default=2000, ge=100)
    """Characters of each past step's reasoning kept in the history: enough for a reasoning
    model's visible plan (the paper's compact history keeps the plan, not just the action)."""
    max_format_retries: int = Field(default=3, ge=0, le=10)
    """Re-asks after a malformed reply before the step gives up."""
    max_reply_chars: int = Field(default=20_000, ge=100)
    """Longer replies are format errors."""
    code_agent: bool = True
    """Offer call_code_agent (hidden anyway when no sandbox is given, and on Android)."""
    ubuntu_open: Literal["launcher", "exec"] = "launcher"
    """How `open` starts applications on Ubuntu: the Super-key launcher or running them directly."""
    generate: GenerateConfig = GenerateConfig()
    """Decoding settings of policy calls."""
    reflection_generate: GenerateConfig = GenerateConfig()
    """Decoding settings of reflection calls."""
    grounding: GroundingConfig = Field(default_factory=lambda: GroundingConfig())
    coding: CodeAgentConfig = Field(default_factory=lambda: CodeAgentConfig())
