"""The JSON contracts of GUI-PRA's guide calls, as pydantic models: the schemas its scorer,
router and memory ask in where the model's provider enforces one (native structured
outputs, `core.llm.structured`). Each is the shape the role's prompt describes, and what a
reply in it holds is read by the role's own parser (`gprm.replies`, `gprm.routing`), so a
structured reply and a free-text one meet the same rules.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RetrievalContract", "RouteArguments", "RouteCall", "RouteContract", "ScoreContract", "SummaryContract"]


class _Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ScoreContract(_Contract):
    """The scorer's judgement of one candidate action (the paper's <eval> object)."""

    score: float = Field(ge=0, le=10)
    """How likely the candidate advances the task, from 0 to 10."""
    reason: str
    """One or two sentences."""
    original_step: str
    """The candidate action, verbatim."""


class RouteArguments(_Contract):
    target: str | None
    """For point: the element to find, in words; else null."""
    answer: str | None
    """For terminate: what the evidence shows; else null."""


class RouteCall(_Contract):
    #: The router's tools by the names it runs them (`gprm.tools`, `gprm.routing.TERMINATE`).
    name: Literal["ui_parser", "point", "terminate"]
    arguments: RouteArguments


class RouteContract(_Contract):
    """The router's request: the tools to run next, or terminate once evidence suffices."""

    thought: str
    """Why these tools, in one or two sentences."""
    actions: list[RouteCall]


class RetrievalContract(_Contract):
    """The memory's retrieval: one entry per step, the kept recent run copied, the rest ""."""

    steps: list[str]


class SummaryContract(_Contract):
    """The memory's progressive summary."""

    summary: str
    """One sentence that condenses the earlier steps."""

