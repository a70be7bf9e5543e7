"""How a rollout ends: one exception per outcome, each carrying its on-disk status.

The loop raises them from wherever the end is decided (a ``done`` action, a budget, a
dead environment) and maps them to `RolloutInfo.status` in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.config import redact_urls
from core.trajectory import RolloutStatus

__all__ = [
    "CostLimit",
    "Done",
    "EnvironmentGone",
    "Errored",
    "Failed",
    "RepeatedFormat",
    "RolloutEnd",
    "RolloutResult",
    "StepLimit",
    "task_failure",
]

_REASON_CHARS = 600


class RolloutEnd(Exception):
    """The rollout is over; `status` is what its header records, the message is the reason."""

    status: ClassVar[RolloutStatus]

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Done(RolloutEnd):
    """The agent declared the task complete."""

    status = "done"


class Failed(RolloutEnd):
    """The agent declared the task infeasible."""

    status = "failed"


class StepLimit(RolloutEnd):
    status = "step_limit"


class CostLimit(RolloutEnd):
    status = "cost_limit"


class EnvironmentGone(RolloutEnd):
    """The environment died under the rollout (dead display, server or VM)."""

    status = "environment_lost"


class RepeatedFormat(RolloutEnd):
    """The policy's replies kept failing to parse into an action."""

    status = "format_error"


class Errored(RolloutEnd):
    """Anything else that persisted (a provider that stayed down, a bug)."""

    status = "errored"


def task_failure(task_id: str, phase: str, exc: BaseException) -> str:
    """One line on why a task's `phase` (``setup``, ``scoring``) failed, naming the task and,
    when the error says so, the step: the project's task errors already read ``task X: setup
    step 2 (execute) failed: ...``; anything else is prefixed with the task, the phase and its
    type. Secrets in URLs are removed and the line is shortened."""
    text = " ".join((str(exc).strip() or type(exc).__name__).split())
    if not text.startswith(f"task {task_id}:"):
        own = type(exc).__module__.split(".")[0] in ("core", "environments", "runner", "aws")
        text = f"task {task_id}: {phase} failed: " + (text if own else f"{type(exc).__name__}: {text}")
    text = redact_urls(text)
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


@dataclass(frozen=True, slots=True)
class RolloutResult:
    """What a finished rollout hands back to its strategy."""

    status: RolloutStatus
    reason: str
    steps: int
    #: The last action's kind (``done``, ``fail``, ``click`` ...), None if no step acted.
    last_action: str | None
    dollars: float
    seconds: float

    @property
    def declared_infeasible(self) -> bool:
        return self.status == "failed"
