"""The JSON each OS-Themis role must answer with, as pydantic schemas.

These are what the model writes; rules that need the trajectory (which steps exist, which
may be milestones) are checked by the roles themselves, on top of these shapes.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

__all__ = [
    "Concern",
    "ConcernKind",
    "JudgeReply",
    "LastKReply",
    "Milestone",
    "QAReview",
    "ReviewerReply",
    "SelectorReply",
    "SequentialReply",
    "VerifierReply",
]

#: A string with something in it besides spaces.
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class _Reply(BaseModel):
    # Models add fields of their own now and then; ignoring them beats re-asking.
    model_config = ConfigDict(extra="ignore")


class Milestone(_Reply):
    """A step whose outcome decides the task, and the observable state that proves it."""

    step: int = Field(ge=0)
    """Index of the step whose before/after screens are checked."""
    goal: Text
    """The assessment goal: what must be visible after the step for it to count."""
    why: Text
    """Why the task cannot be complete without this."""


class SelectorReply(_Reply):
    """New milestones to verify, or a stop with its reason (or both: these, then stop)."""

    milestones: list[Milestone] = Field(default_factory=list)
    done: bool = False
    """True: no further milestones are needed after these."""
    reason: str = ""
    """Why these milestones (or why stop) in one to three sentences."""


class VerifierReply(_Reply):
    """The verdict on one milestone from its step's before and after screens."""

    step: int
    verdict: Literal[0, 1]
    """1 when the after-screen shows the assessment goal met, else 0."""
    evidence: list[str] = Field(min_length=1)
    """Short, checkable observations from the screenshots."""
    feedback: str = ""
    """When 0: what is wrong or missing, and what would have to be seen instead."""

    @field_validator("verdict", mode="before")
    @classmethod
    def _bool_verdict(cls, value: object) -> object:
        return int(value) if isinstance(value, bool) else value


ConcernKind = Literal["missing_milestone", "lenient_criterion", "uncaptured_failure", "weak_evidence"]


class Concern(_Reply):
    """One problem with the milestone set or the verdicts, tied to what can be seen."""

    kind: ConcernKind
    issue: Text
    """What is wrong, in one sentence."""
    evidence: Text
    """The observable signal (step, screen, text) that raises the concern."""
    steps: list[int] = Field(min_length=1)
    """Steps the concern is about; the selector and verifier go back to these."""
    query: Text
    """A targeted question the verifier can answer from those steps' screens."""
    severity: Literal["blocker", "warning"] = "blocker"


class ReviewerReply(_Reply):
    """The audit: sound (go to the judge) or concerns to send back."""

    sound: bool
    concerns: list[Concern] = Field(default_factory=list)
    summary: str = ""


class QAReview(_Reply):
    """For question-answering tasks: the final answer and whether it is right and well formed."""

    is_qa: bool = False
    final_answer: str = ""
    """The agent's last answer, verbatim."""
    answer_ok: bool | None = None
    """True only when content and format are verified to match the question."""


class JudgeReply(_Reply):
    """The final decision on the whole deliberation."""

    decision: Literal["completed", "not_completed", "uncertain"]
    reason: Text
    missing: list[str] = Field(default_factory=list)
    """Conditions of the goal that are unmet or unproven."""
    key_steps: list[int] = Field(default_factory=list)
    """Steps whose evidence decided it."""
    qa: QAReview = Field(default_factory=QAReview)


class LastKReply(_Reply):
    """The last-K baseline: one look at the final screens."""

    reason: Text
    score: Literal[0, 1]

    @field_validator("score", mode="before")
    @classmethod
    def _bool_score(cls, value: object) -> object:
        return int(value) if isinstance(value, bool) else value


class SequentialReply(_Reply):
    """The sequential baseline: does this one screen show the goal met?"""

    reason: Text
    satisfied: bool
