"""A rollout's header and a whole rollout in memory."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from .base import Record
from .step import Step

__all__ = [
    "AGENT_OUTCOMES",
    "TASK_ERRORS",
    "TERMINAL_STATUSES",
    "WORLD_FAILURES",
    "RolloutInfo",
    "RolloutStatus",
    "Trajectory",
]

RolloutStatus = Literal[
    "running",
    "done",
    "failed",
    "step_limit",
    "cost_limit",
    "environment_lost",
    "format_error",
    "errored",
    "setup_failed",
]

#: Every status but ``running``: the rollout will not change any more.
TERMINAL_STATUSES: frozenset[str] = frozenset(get_args(RolloutStatus)) - {"running"}
#: The task itself could not be run or scored here: its setup steps failed (status
#: ``setup_failed``: the agent never started) or its scorer failed on the final state (the
#: agent's own status is kept, and `RolloutInfo.score_error` says why there is no score). Such
#: a rollout has no score and its task counts as errored, never as 0: these are errors of the
#: task or the environment, not of the agent.
TASK_ERRORS: frozenset[str] = frozenset({"setup_failed", "scoring_failed"})
#: Ended by the world (dead VM, persistent API errors, a failed setup), not by the agent; a
#: resumed run may redo these.
WORLD_FAILURES: frozenset[str] = frozenset({"environment_lost", "errored", "setup_failed"})
#: Ended by the agent or its budget: a real result to judge and score.
AGENT_OUTCOMES: frozenset[str] = TERMINAL_STATUSES - WORLD_FAILURES


class RolloutInfo(Record):
    """The header of one rollout, ``rollout.json`` beside its ``traj.jsonl``.

    It lives in a file of its own, rewritten atomically, because it changes in place
    (status, end time, score) while the step log only grows: a header line inside the log
    could not be updated without rewriting the whole log, and listing a run's rollouts
    would have to open every log. Reading it never touches the steps.
    """

    schema_version: int = 1
    run_id: str
    task_id: str
    rollout: int = Field(ge=0)
    """Index k of ``rollout-<k>``."""
    model: str
    """The policy's ``provider/model`` for this rollout (from the mixture)."""
    seed: int | None = None
    environment: str | None = None
    """Name of the environment the rollout ran in (e.g. ``local-3``)."""
    network: bool | None = None
    """Whether that environment reached the internet during the rollout (None: it did not say)."""
    status: RolloutStatus = "running"
    """``done``: the agent declared success; ``failed``: it declared the task infeasible;
    ``step_limit`` / ``cost_limit``: a budget ran out; ``environment_lost``: the
    environment died; ``format_error``: the model's replies kept failing to parse;
    ``errored``: any other error that persisted after retries; ``setup_failed``: the task's
    setup steps failed, so the agent never started."""
    reason: str | None = None
    """One line on why the rollout ended, secrets removed."""
    attempts: int = Field(default=1, ge=1)
    """How many times this rollout was started, counting this one."""
    started_at: float
    """Wall-clock start of this attempt, seconds since the epoch."""
    ended_at: float | None = None
    step_count: int = Field(default=0, ge=0)
    """Steps in ``traj.jsonl`` when the header was last written."""
    score: float | None = None
    """The task evaluator's score of the final state, when evaluated."""
    label: str | None = None
    """What made the rollout when it was not a real agent on a real environment: the run's
    label (SIMULATED ..., or a scripted policy's note)."""
    score_error: str | None = None
    """Why there is no score although the agent ended: the task's scorer failed on the final
    state (``scoring_failed``), in one line naming the task, the step and the cause."""
    branch_of: int | None = None
    """A branch: this rollout continues rollout `branch_of` from the checkpoint taken after
    its first `branch_at` steps; those shared steps are stored once, there, and this
    rollout's own steps are numbered from 0."""
    branch_at: int | None = Field(default=None, ge=1)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_STATUSES


class Trajectory(Record):
    """A whole rollout in memory: its header and its steps (screenshots stay on disk)."""

    schema_version: int = 1
    info: RolloutInfo
    steps: list[Step] = Field(default_factory=list)
