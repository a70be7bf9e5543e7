"""Errors a task can cause, each rendered as one line that names the task and what to fix.

They derive from `core.protocols.EnvError` so the runner can tell a bad or unsupported task
(mark that task errored, go on with the others) from a lost environment.
"""

from __future__ import annotations

from core.protocols import EnvError

__all__ = [
    "TaskError",
    "TaskFileError",
    "TaskRunError",
    "UnsupportedGetter",
    "UnsupportedMetric",
    "UnsupportedStep",
]


class TaskError(EnvError):
    """Base of every task error."""


class TaskFileError(TaskError):
    """A task file or task list that cannot be read or does not fit the format."""


class TaskRunError(TaskError):
    """A setup step, getter or metric failed while a task was being prepared or scored."""


class UnsupportedStep(TaskError):
    """A setup or postconfig step type this runner does not implement."""

    def __init__(self, task_id: str, step_type: str, supported: list[str], reason: str = "") -> None:
        self.task_id = task_id
        self.step_type = step_type
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"task {task_id}: setup step type {step_type!r} is not supported{why}; "
            f"use one of {', '.join(sorted(supported))} or skip this task"
        )


class UnsupportedMetric(TaskError):
    """An evaluator metric (or one of its options) this runner does not implement."""

    def __init__(self, task_id: str, metric: str, reason: str = "") -> None:
        self.task_id = task_id
        self.metric = metric
        detail = f" ({reason})" if reason else ""
        super().__init__(f"task {task_id}: metric {metric!r} is not supported{detail}; skip this task")


class UnsupportedGetter(TaskError):
    """An evaluator result/expected getter type this runner does not implement."""

    def __init__(self, task_id: str, getter: str, reason: str = "") -> None:
        self.task_id = task_id
        self.getter = getter
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"task {task_id}: evaluator getter type {getter!r} is not supported{why}; skip this task"
        )
