"""Settings of the step guides: what a run's ``guide.options`` may hold, by guide.

Each guide class names its model as ``Options``; `gprm.make_guide` validates the options
against it, so a misspelt key or a wrong type is one line before any desktop starts, and
the configuration page documents every field from here. Objects of the run (the element
tree's fetch, the pointing model) are not settings: the runner passes them beside.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.ocr import OcrBackend

from .pointing import Convention
from .tools import PointMode

__all__ = ["GuiPraOptions", "PrmOptions"]


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    max_reasks: int = Field(default=1, ge=0)
    """Times a candidate's score is asked again after a reply that could not be read."""
    image_side: int | None = Field(default=1280, ge=64)
    """Screenshots are shrunk so their longer side is at most this; None sends them as taken."""


class PrmOptions(_Options):
    """The standard PRM baseline: each candidate scored against the full raw history."""


class GuiPraOptions(_Options):
    """GUI-PRA: dynamic memory, UI perception tools chosen by a router, rubric scoring with
    the previous step's pick in context (defaults as the paper ran it)."""

    parser: Literal["auto", "tree", "local", "omniparser"] | None = "auto"
    """The UI parser tool: ``auto`` (the environment's element tree when it serves one, else
    ``local``), ``tree``, ``local`` (OCR and outlines), ``omniparser`` (the paper's, at
    `parser_url`), or None (no parser tool: the paper's ablation)."""
    ocr: OcrBackend | None = None
    """The local parser's OCR: ``tesseract`` or ``rapidocr``; None takes tesseract when installed."""
    parser_url: str | None = None
    """``http://host:port`` of an OmniParser server (with ``parser: omniparser``)."""
    point_mode: PointMode = "auto"
    """How the point tool points: ``model`` (the pointing model), ``ocr`` (matching the
    description against the parser's elements), or ``auto`` (the model when one is given)."""
    point_coordinates: Convention | Literal["profile"] = "percent"
    """The space the pointing prompt declares: ``percent`` (Molmo's), or ``profile`` for the
    pointing model's own convention (`docs/model-rules.md`)."""
    memory: bool = True
    """False: the ablation without dynamic memory (the raw recent history only)."""
    memory_threshold: int = Field(default=5, ge=0)
    """Steps of history past which older steps are condensed into a summary."""
    fallback_recent: int = Field(default=3, ge=0)
    """Recent steps kept verbatim when the summary cannot be made."""
    tools: bool = True
    """False: the ablation without UI perception tools."""
    max_tool_calls: int = Field(default=2, ge=0)
    """Routing calls at most per step (each may call tools)."""
    prefetch: bool = True
    """Parse the screen in the background while the memory and routing calls run."""
    action_space: str | None = None
    """The agent's action reference shown to the scorer (the rubric's action space); None
    takes the worker's own."""
    point: bool = True
    """False: the ablation without the point tool."""
