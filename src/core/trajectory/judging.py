"""What judging a task's rollouts leaves behind: narratives, the selection, the result."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .base import Record
from .rollout import RolloutInfo

__all__ = ["Narrative", "RolloutError", "Selection", "TaskResult", "rollout_error", "rollout_errors"]


class Narrative(Record):
    """A rollout told as behavior: the start, the facts of each transition, the end.

    Written to ``narratives/rollout-<k>.json`` as transitions are narrated.
    """

    schema_version: int = 1
    rollout: int = Field(ge=0)
    initial_state: str = ""
    """Description of the screen before the first action."""
    facts: list[list[str]] = Field(default_factory=list)
    """Facts per transition: ``facts[i]`` is what step i's action changed on screen."""
    final_state: str = ""
    """Description of the screen after the last action."""
    content_hashes: dict[str, str] = Field(default_factory=dict)
    """SHA-256 of each input screenshot by file name, to tell whether a cached narrative
    still matches the rollout on disk."""
    model: str | None = None
    """``provider/model`` that wrote the narrative."""
    error: str | None = None
    """Why some steps have no facts because the narrator's calls failed (None: none did)."""


class Selection(Record):
    """Which rollout a strategy picked for a task and why (``selection.json``)."""

    schema_version: int = 1
    strategy: str
    """Name of the selection strategy (e.g. ``bjudge_mcq``, ``tournament``, ``critic``)."""
    candidates: list[int]
    """Rollout indices that were compared."""
    chosen: int | None
    """The picked rollout, or None when no candidate could be chosen."""
    reasoning: str = ""
    seed: int | None = None
    permutations: list[list[int]] = Field(default_factory=list)
    """Orders in which candidates were shown to the judge, one list per judge call."""
    dollars: float = 0.0
    """Cost of the selection's model calls."""
    call_ids: list[str] = Field(default_factory=list)
    """Ids of the ledger's model calls made for this selection."""
    error: str | None = None
    """Why no candidate could be chosen when the judge's calls failed (then `chosen` is None)."""
    model: str | None = None
    """``provider/model`` that judged."""

    @model_validator(mode="after")
    def _chosen_is_a_candidate(self) -> Selection:
        if self.chosen is not None and self.chosen not in self.candidates:
            raise ValueError(f"chosen rollout {self.chosen} is not among candidates {self.candidates}")
        return self


class RolloutError(BaseModel):
    """Why a rollout has no score although its task has a scorer: the task's setup or its
    scorer failed (`core.trajectory.TASK_ERRORS`), in one line naming the task, the step and
    the cause."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: Literal["setup_failed", "scoring_failed"]
    reason: str


def rollout_error(info: RolloutInfo | None) -> RolloutError | None:
    """Why the rollout has no score because its task's setup or scorer failed, or None."""
    if info is None:
        return None
    if info.status == "setup_failed":
        return RolloutError(outcome="setup_failed", reason=info.reason or "the task's setup failed")
    if info.score_error is not None:
        return RolloutError(outcome="scoring_failed", reason=info.score_error)
    return None


def rollout_errors(headers: Mapping[int, RolloutInfo | None]) -> dict[int, RolloutError]:
    """The rollouts among `headers` whose task's setup or scorer failed."""
    found = {k: rollout_error(info) for k, info in sorted(headers.items())}
    return {k: e for k, e in found.items() if e is not None}


class TaskResult(Record):
    """How a task went over its rollouts (``result.json``).

    A task with `errors` (a rollout whose setup or scorer failed) is *errored*: it has no
    score to count, and metrics, exports and sweeps leave it out and count it beside them.
    """

    schema_version: int = 1
    task_id: str
    scores: dict[int, float | None] = Field(default_factory=dict)
    """Evaluator score per rollout index; None when that rollout was not evaluated."""
    selected: int | None = None
    """The rollout the selection picked, if any."""
    selected_score: float | None = None
    """Score of the selected rollout: the run's success measure with selection."""
    n: int = Field(default=0, ge=0)
    """Rollouts counted for pass@N."""
    pass_at_n: float | None = None
    """Best score over the N rollouts (what an oracle selector would get); None if none
    was evaluated, or if the task errored (a best of fewer than N is not pass@N)."""
    errors: dict[int, RolloutError] = Field(default_factory=dict)
    """Rollouts whose task setup or scorer failed, by index: they have no score, and the task
    counts as errored, never as 0."""

    @property
    def errored(self) -> bool:
        """Whether a rollout's setup or scorer failed, so the task has no score to count."""
        return bool(self.errors)

    @classmethod
    def from_scores(cls, task_id: str, scores: dict[int, float | None], selected: int | None,
                    errors: Mapping[int, RolloutError] | None = None) -> TaskResult:
        """Fill the derived fields from the per-rollout scores (and the rollouts' errors)."""
        evaluated = [s for s in scores.values() if s is not None]
        errors = dict(errors or {})
        return cls(
            task_id=task_id,
            scores=dict(scores),
            selected=selected,
            selected_score=scores.get(selected) if selected is not None else None,
            n=len(scores),
            pass_at_n=max(evaluated) if evaluated and not errors else None,
            errors=errors,
        )
