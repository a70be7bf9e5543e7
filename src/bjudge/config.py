"""Settings of the narrative generator, the judges and the representations.

Pydantic models so the runner can write them into a run's config and override them from
YAML or the command line; every field has a default that works.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.llm import GenerateConfig

__all__ = ["AugmentConfig", "JudgeConfig", "NarrativeConfig", "RepresentationConfig"]


class AugmentConfig(BaseModel):
    """How a transition's screenshots are marked, zoomed and shrunk before a model sees them."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    longest_side: int | None = Field(default=None, ge=64)
    """Screenshots are downscaled so their longer side is at most this; None (the paper's
    setting) shows them at native resolution with the provider's high detail. The zoom crop
    is always cut from the full-size screenshot. 768 (preset ``presets/judge-cheap.yaml``)
    keeps a 1080p screen at about a third of its image tokens (benchmarks/judge_cost.py)."""
    zoom_size: int = Field(default=300, ge=16)
    """Side of the square cut around the final pointer position, in screen pixels (the
    paper's fixed-size crop)."""
    change_zoom: bool = True
    """Steps without a pointer get the same crop where the screen changed most (pixel
    difference of before and after); off: no zoom for them, as in the paper."""
    change_threshold: int = Field(default=24, ge=0, le=255)
    """A pixel counts as changed when a channel differs by more than this (ignores
    compression noise and anti-aliasing shimmer)."""
    zoom_scale: float = Field(default=1.7, ge=1.0, le=8.0)
    """How much the zoom crop is enlarged for the model; 300 px x 1.7 stays within one
    512-px image tile."""
    zoom_resample: Literal["nearest", "bilinear", "bicubic"] = "bicubic"
    """Filter used to enlarge the crop."""
    marker_radius: int = Field(default=12, ge=3)
    """Radius of the pointer markers, in pixels of the image the model sees."""
    outline_colour: tuple[int, int, int] = (255, 0, 0)
    """RGB colour of the pointer markers and the zoom outline."""
    outline_width: int = Field(default=3, ge=1)
    """Line width of the markers and outline, in pixels."""
    png_level: int = Field(default=1, ge=0, le=9)
    """zlib level of the PNGs sent; 1 is several times faster than the default."""


class NarrativeConfig(BaseModel):
    """The fact generator: one model call per transition."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    augment: AugmentConfig = Field(default_factory=AugmentConfig)
    max_format_retries: int = Field(default=2, ge=0, le=10)
    """Re-asks after a reply without a parsable facts section; then the step has no facts."""
    max_concurrency: int = Field(default=16, ge=1)
    """Transitions narrated at once by one builder (the model's own limit applies too)."""
    max_facts: int = Field(default=20, ge=1)
    """Facts kept per transition; a longer list is cut."""
    code_output_chars: int = Field(default=1500, ge=100)
    """Characters of each code-agent output shown to the generator (head and tail kept)."""
    show_intent: bool = False
    """Show the narrator the agent's stated intent (an action's element descriptions, e.g.
    "the Save button"). Off, as in the paper: it sees the executed action and code, so it
    is not invited to confirm what the agent believed it did."""
    generate: GenerateConfig = Field(default_factory=GenerateConfig)
    """Decoding settings of the generator's calls."""


class RepresentationConfig(BaseModel):
    """How a rollout is shown to a judge when it is not a behavior narrative."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    screenshot_budget: int = Field(default=50, ge=1)
    """Screenshots over all candidates for the screenshot-only representation (each
    rollout gets budget // N, at least 1, evenly spaced)."""
    longest_side: int | None = Field(default=1280, ge=64)
    """Downscale of every screenshot shown."""
    summary_frames: int = Field(default=8, ge=1)
    """Screenshots the trajectory summariser sees, evenly spaced."""
    png_level: int = Field(default=1, ge=0, le=9)
    generate: GenerateConfig = Field(default_factory=GenerateConfig)
    max_format_retries: int = Field(default=2, ge=0, le=10)


class JudgeConfig(BaseModel):
    """The judges: MCQ and its pairwise and independent-scoring baselines."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    seed: int | None = None
    """Seed of the candidate shuffle and tie-breaks; None draws one, which the selection records."""
    permutations: int = Field(default=1, ge=1, le=16)
    """MCQ only: judge several shuffled orders and take the majority, against position bias."""
    shuffle: bool = True
    """Show candidates in a seeded random order (off: rollout order)."""
    max_reasks: int = Field(default=2, ge=0, le=10)
    """Re-asks after a missing or out-of-range answer; then that call decides nothing."""
    cite: bool = True
    """Ask the judge to cite and contrast facts by their ids (the paper's small gain)."""
    key_screen_threshold: int = Field(default=3, ge=1, le=5)
    """WebJudge baseline only: screenshots scored at least this (1-5) are kept as key
    screenshots for its outcome call."""
    generate: GenerateConfig = Field(default_factory=GenerateConfig)
