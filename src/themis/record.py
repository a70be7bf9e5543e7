"""What a critic leaves behind: the verdict and the whole deliberation behind it.

Saved beside the trajectory as ``critic-<name>.json`` (atomically), so a report can show
how the verdict came about and a later command can reuse it instead of paying again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from core.atomic import write_json_atomic
from core.trajectory import Record

from .asking import AttemptRecord
from .schemas import Concern, JudgeReply, Milestone, Suggestion

__all__ = [
    "Check",
    "CriticRecord",
    "Failure",
    "LastKRecord",
    "LastKSample",
    "OtherRecord",
    "PassRecord",
    "ReviewRecord",
    "SelectionRound",
    "SequentialCheck",
    "SequentialRecord",
    "ThemisRecord",
    "ThemisVoteRecord",
    "Verdict",
    "load_verdict",
    "save_verdict",
    "verdict_path",
]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Failure(_Part):
    """A role whose calls all failed or never validated; the deliberation went on without it."""

    role: str
    what: str
    """Which call: e.g. ``selector pass 1 round 2`` or ``verifier step 4``."""
    attempts: list[AttemptRecord]


class Check(_Part):
    """A milestone and the verifier's verdict on it."""

    milestone: Milestone
    source: Literal["selector", "reviewer"] = "selector"
    """``reviewer``: added to re-check a step a reviewer's concern cited."""
    verdict: Literal["success", "failure", "uncertain"] | None = None
    """The verifier's verdict (three-valued, as in the paper); None when it failed to answer."""
    evidence: list[str] = Field(default_factory=list)
    feedback: str = ""
    suggestions: list[Suggestion] = Field(default_factory=list)
    """Goals the verifier proposes for the selector's next round."""
    assumed: bool = False
    """True when the verifier is switched off (ablation): the verdict was not checked."""
    call_ids: list[str] = Field(default_factory=list)

    @field_validator("verdict", mode="before")
    @classmethod
    def _binary_of_version_1(cls, value: object) -> object:
        return {1: "success", 0: "failure"}.get(value, value) if isinstance(value, int) else value


class SelectionRound(_Part):
    """One selector call and the verification of what it chose."""

    round: int = Field(ge=1)
    prompt: Literal["initial", "follow_up", "revision"]
    done: bool = False
    reason: str = ""
    checks: list[Check] = Field(default_factory=list)
    call_ids: list[str] = Field(default_factory=list)


class PassRecord(_Part):
    """One run of the milestone verification module (selector rounds until stop or cap)."""

    index: int = Field(ge=0)
    """0 for the first pass; n for the pass answering review round n."""
    rounds: list[SelectionRound] = Field(default_factory=list)
    stopped: Literal["selector", "cap", "exhausted", "failure", "every_step"] = "selector"
    """Why the pass ended: the selector stopped, the round cap, no step left, a failure, or
    (without a selector) every step was verified at once."""


class ReviewRecord(_Part):
    round: int = Field(ge=1)
    sound: bool
    concerns: list[Concern] = Field(default_factory=list)
    summary: str = ""
    call_ids: list[str] = Field(default_factory=list)


class ThemisRecord(_Part):
    """The deliberation of the four roles, in order."""

    kind: Literal["themis"] = "themis"
    passes: list[PassRecord] = Field(default_factory=list)
    reviews: list[ReviewRecord] = Field(default_factory=list)
    judge: JudgeReply | None = None
    judge_call_ids: list[str] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    """Calls whose every attempt failed or was refused."""
    rejected: list[Failure] = Field(default_factory=list)
    """Attempts refused before a later attempt of the same call was accepted (unparseable
    JSON, a rule broken such as choosing the terminating step, a failed call)."""

    def checks(self) -> list[Check]:
        return [c for p in self.passes for r in p.rounds for c in r.checks]


class LastKSample(_Part):
    score: Literal[0, 1] | None
    """None when the sample failed; then the whole verdict is an error, not a vote of 0."""
    reason: str = ""
    call_ids: list[str] = Field(default_factory=list)


class LastKRecord(_Part):
    kind: Literal["lastk"] = "lastk"
    frames: list[str]
    """Labels of the screens shown, in order."""
    vote: str
    samples: list[LastKSample] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)


class SequentialCheck(_Part):
    frame: str
    satisfied: bool | None
    """None: skipped as a repeat of a recent screen, or the call failed."""
    skipped: bool = False
    reason: str = ""
    call_ids: list[str] = Field(default_factory=list)


class SequentialRecord(_Part):
    kind: Literal["sequential"] = "sequential"
    checks: list[SequentialCheck] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)


class ThemisVoteRecord(_Part):
    """Several independent OS-Themis deliberations and the vote over their rewards."""

    kind: Literal["themis_vote"] = "themis_vote"
    vote: str
    runs: list[ThemisRecord]
    rewards: list[Literal[0, 1] | None]
    """Each run's reward; None for a run that failed (then the verdict is an error)."""
    errors: list[str | None] = Field(default_factory=list)


class OtherRecord(BaseModel):
    """The record of a critic of your own (``package.module:Class``): any ``kind`` but the
    built-in ones, ``notes`` (lines the verdict's summary shows), ``failures`` like the
    built-in critics', and whatever further fields it wants to keep in ``critic-<name>.json``."""

    model_config = ConfigDict(extra="allow")

    kind: str
    notes: list[str] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)


_BUILT_IN_RECORDS = frozenset({"themis", "themis_vote", "lastk", "sequential"})


def _record_kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in _BUILT_IN_RECORDS else "other"


#: A verdict's record, read by its ``kind``: a built-in critic's, else `OtherRecord`.
CriticRecord = Annotated[
    Annotated[ThemisRecord, Tag("themis")] | Annotated[ThemisVoteRecord, Tag("themis_vote")]
    | Annotated[LastKRecord, Tag("lastk")] | Annotated[SequentialRecord, Tag("sequential")]
    | Annotated[OtherRecord, Tag("other")],
    Discriminator(_record_kind),
]


class Verdict(Record):
    """A critic's binary reward for one trajectory, with the reasoning that produced it.

    A critic whose calls failed for good has ``error`` set and no ``reward``: a failure is
    not a rejection, so it is never scored as 0 and never reused by a later command.
    """

    schema_version: int = 2
    critic: str
    """Name of the critic (``themis``, ``lastk``, ``sequential``, or one of your own)."""
    model: str
    """``provider/model`` behind every role."""
    reward: Literal[0, 1] | None
    """1 accepted, 0 rejected; None exactly when ``error`` is set."""
    reason: str
    task_id: str | None = None
    options: dict[str, object] = Field(default_factory=dict)
    """The critic's options, as given to ``make_critic``."""
    seconds: float = 0.0
    calls: int = 0
    """Model calls made, failed ones included."""
    error: str | None = None
    """Why the critic could not decide (its calls failed or never validated)."""
    record: CriticRecord

    @model_validator(mode="before")
    @classmethod
    def _no_reward_with_error(cls, data: object) -> object:
        # Version 1 files stored a failed critic as reward 0 next to its error: read them as
        # the failures they were, so a rerun grades them again instead of reusing a fake 0.
        if isinstance(data, dict) and data.get("error") and data.get("reward") is not None:
            return {**data, "reward": None}
        return data

    @model_validator(mode="after")
    def _reward_or_error(self) -> Verdict:
        if (self.reward is None) == (self.error is None):
            raise ValueError("a verdict has either a reward or an error, not both and not neither")
        return self

    @property
    def accepted(self) -> bool | None:
        """True/False from the reward; None when the critic failed."""
        return None if self.reward is None else self.reward == 1


def verdict_path(rollout: Path | str, critic: str) -> Path:
    """Where a verdict is saved: ``critic-<name>.json`` in a rollout folder, or, for a
    published trace file (``*.json``), ``<stem>.critic-<name>.json`` beside it."""
    path = Path(rollout)
    if path.suffix == ".json":
        return path.with_name(f"{path.stem}.critic-{critic}.json")
    return path / f"critic-{critic}.json"


def save_verdict(rollout: Path | str, verdict: Verdict, *, durable: bool = True) -> Path:
    """Write the verdict beside the trajectory (`verdict_path`), atomically."""
    path = verdict_path(rollout, verdict.critic)
    write_json_atomic(path, verdict, durable=durable)
    return path


def load_verdict(rollout: Path | str, critic: str) -> Verdict | None:
    """The saved verdict of `critic` for this trajectory, or None if there is none."""
    try:
        return Verdict.model_validate_json(verdict_path(rollout, critic).read_bytes())
    except FileNotFoundError:
        return None
