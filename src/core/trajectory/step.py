"""One step of a rollout: what the agent saw, thought and did, and how long it took."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import Record

__all__ = ["PointerEvent", "Step", "StepTimings"]


class PointerEvent(BaseModel):
    """Where the pointer acted during a step, in screen pixels (drawn on screenshots and
    used to zoom in on the right place when the step is narrated)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["click", "move", "drag"]
    x: int
    y: int


class StepTimings(BaseModel):
    """Wall-clock seconds spent in each phase of a step."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    propose: float = 0.0
    """Choosing the action: policy calls, plus the guide's when one is enabled."""
    execute: float = 0.0
    """Running the action or the coding agent's loop in the environment."""
    settle: float = 0.0
    """Waiting for the screen to stop changing after the action."""


class Step(Record):
    """One line of ``traj.jsonl``.

    The screenshots are PNG files beside the log; a step names them rather than holding
    them, so reading a step never decodes an image.
    """

    schema_version: int = 1
    index: int = Field(ge=0)
    """Position in the rollout, from 0; also its line number in ``traj.jsonl``."""
    started_at: float | None = None
    """Wall-clock start, seconds since the epoch."""
    thought: str = ""
    """The policy's reasoning before acting."""
    reflection: str | None = None
    """The reflection agent's note on the previous step, when reflection is on."""
    action: dict[str, Any] | None = None
    """The typed action the policy chose, as the policy serialises it (it carries its own
    ``type`` tag); None when no action could be parsed."""
    code: str | None = None
    """What was executed in the environment for the action (e.g. pyautogui code)."""
    before_screenshot: str | None = None
    """File name, beside ``traj.jsonl``, of the screen the action was chosen on."""
    after_screenshot: str | None = None
    """File name, beside ``traj.jsonl``, of the screen once the action settled."""
    pointer: list[PointerEvent] = Field(default_factory=list)
    code_agent: dict[str, Any] | None = None
    """The coding agent's session when the action delegated to it (turns, code, outputs)."""
    guide: dict[str, Any] | None = None
    """The step guide's record when one chose among candidates (candidates, scores, pick)."""
    call_ids: list[str] = Field(default_factory=list)
    """Ids of the ledger's model calls made for this step."""
    timings: StepTimings = Field(default_factory=StepTimings)
    error: str | None = None
    """Why the step failed (unparsable reply, action error), secrets removed; None if not."""
    rejected: list[str] = Field(default_factory=list)
    """Why each refused reply of this step was refused (unparsable, hostile, ungroundable), in
    order; the step's action, if any, came from the reply after the last of them."""
