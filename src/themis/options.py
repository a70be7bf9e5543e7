"""Settings of the critics; what a run's configuration writes for them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.llm import GenerateConfig

__all__ = ["ROLES", "Decoding", "LastKOptions", "Role", "SequentialOptions", "ThemisOptions"]

Role = Literal["selector", "verifier", "reviewer", "judge"]
#: The four OS-Themis roles, the keys of per-role settings.
ROLES: tuple[Role, ...] = ("selector", "verifier", "reviewer", "judge")


class Decoding(BaseModel):
    """One role's decoding, over the critic's own (unset fields keep the critic's)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    temperature: float | None = Field(default=None, ge=0.0)
    """The role's temperature."""
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    """The role's top_p."""
    max_tokens: int | None = Field(default=None, ge=1)
    """The role's output limit."""
    seed: int | None = None
    """The role's decoding seed."""


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    retries: int = Field(default=2, ge=0, le=10)
    """Extra attempts of a role's call after a failed call or a reply that does not validate."""
    image_side: int | None = Field(default=1280, ge=64)
    """Screenshots are shrunk so their longer side is at most this; None sends them as taken."""
    temperature: float | None = None
    """Forces the roles' temperature; None asks for deterministic sampling where the model allows."""
    max_tokens: int | None = Field(default=None, ge=1)
    """The roles' output limit; None leaves room for the model's thinking (`core.llm.limits`)."""

    def generate_config(self) -> GenerateConfig:
        return GenerateConfig.deterministic(temperature=self.temperature, max_tokens=self.max_tokens)


class ThemisOptions(_Options):
    """OS-Themis: caps from the paper (selector 6 rounds, reviewer 2 rounds, 2 retries), and
    the switches of its experiments (ablations of §4.5, per-role models and decoding of
    appendix E.1, voting of appendix E.2). Every option is written into each verdict."""

    prompts: Literal["paper", "condensed"] = "paper"
    """The roles' prompts and reply contracts: the paper's (tables 13-16), or the shorter
    condensed ones this project used first."""
    selector_rounds: int = Field(default=6, ge=1)
    """Selector calls per pass of the milestone module (the first pass and each review's)."""
    reviewer_rounds: int = Field(default=2, ge=0)
    """Reviewer calls at most; 0 goes from the milestones straight to the judge."""
    selector_screens: Literal["none", "ends", "all"] = "ends"
    """Screens the selector sees besides the history: none, the first and last, or all."""
    thumbnail_side: int = Field(default=512, ge=64)
    """Longer side of the selector's screens when it sees all of them."""
    thought_chars: int = Field(default=600, ge=40)
    """Each step's thought is cut to this many characters in histories."""
    concurrency: int = Field(default=4, ge=1)
    """Milestones verified at once."""
    selector: bool = True
    """False: ablation without the selector; every selectable step goes to the verifier."""
    verifier: bool = True
    """False: ablation without the verifier; every chosen milestone counts as verified."""
    reviewer: Literal["critic", "advisor", "off"] = "critic"
    """The reviewer's role: the paper's critic, the advisor variant of its table 4, or none."""
    judge: bool = True
    """False: ablation without the judge; success only when every milestone is verified."""
    assignment_goals: bool = True
    """False: the verifier is not given the selector's assessment goals (table 5)."""
    models: dict[Role, str] = Field(default_factory=dict)
    """A role's own model as ``provider/model`` (the critic's model for the others)."""
    decoding: dict[Role, Decoding] = Field(default_factory=dict)
    """A role's own decoding (temperature, top_p, max_tokens, seed)."""
    votes: int = Field(default=1, ge=1)
    """Independent deliberations to vote over (k of appendix E.2)."""
    vote: Literal["majority", "all", "any"] = "majority"
    """``majority``: more than half accept; ``all``: every run; ``any``: at least one."""

    def generate_config(self) -> GenerateConfig:
        """Deterministic for one deliberation; several to vote over ask for diverse sampling
        (the model's own where it takes no temperature), unless a temperature is forced."""
        if self.votes > 1 and self.temperature is None:
            return GenerateConfig.diverse(max_tokens=self.max_tokens)
        return super().generate_config()

    def role_config(self, role: str) -> GenerateConfig:
        """The decoding of `role`: the critic's, with the role's own settings over it."""
        base = self.generate_config()
        own = self.decoding.get(role)  # type: ignore[call-overload]
        if own is None:
            return base
        return base.merged(GenerateConfig(**own.model_dump(exclude_none=True)))

    @model_validator(mode="after")
    def _votes_can_differ(self) -> ThemisOptions:
        if self.votes > 1:
            temps = [self.role_config(r).temperature for r in ROLES]
            if all(t == 0 for t in temps):
                raise ValueError("votes > 1 repeats one deterministic deliberation at temperature 0: "
                                 "leave temperature unset (diverse sampling) or set it above 0")
        return self


class LastKOptions(_Options):
    """The last-K baseline (ZeroGUI-style direct assessment)."""

    k: int = Field(default=2, ge=1)
    """How many of the last screens to show."""
    samples: int = Field(default=1, ge=1)
    """Independent calls to vote over."""
    vote: Literal["majority", "all", "any"] = "majority"
    """``majority``: more than half say 1; ``all``: every sample; ``any``: at least one."""


class SequentialOptions(_Options):
    """The sequential baseline (DigiRL-style state checking, stop at the first success)."""

    skip_repeats: bool = True
    """Do not ask about a screen that looks the same as one of the last few asked about."""
    repeat_window: int = Field(default=5, ge=1)
    """How many of the screens last asked about a new screen is compared with."""
    repeat_threshold: float = Field(default=0.1, ge=0.0)
    """Mean squared difference (0-255 grey levels, on 64x64 thumbnails) up to which two
    screens count as the same. Kept low on purpose: one typed character in a 1024x768
    terminal measures about 0.45, and such a change can decide a task."""
