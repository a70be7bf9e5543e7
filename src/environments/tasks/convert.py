"""Between this package's `OSWorldTask` and the run record `core.trajectory.Task`.

The runner stores `core.trajectory.Task` (the task JSON kept verbatim); setup and evaluation
work on the validated `OSWorldTask`. Both directions keep every OSWorld field.
"""

from __future__ import annotations

from pathlib import Path

from core.trajectory import Task
from core.trajectory.task import Platform
from environments.tasks.loader import parse_task
from environments.tasks.model import OSWorldTask

__all__ = ["from_core_task", "to_core_task"]


def to_core_task(task: OSWorldTask, platform: Platform = "ubuntu") -> Task:
    """The run record for `task` (its path, if any, becomes `source_path`)."""
    data = task.model_dump(mode="json", exclude_unset=True)
    return Task.from_osworld(data, platform=platform, source_path=str(task.path) if task.path else None)


def from_core_task(task: Task) -> OSWorldTask:
    """Validate a run record's task JSON; relative files resolve beside its `source_path`."""
    source = task.source_path or f"task {task.id}"
    parsed = parse_task(task.to_osworld(), source)
    return parsed.located(Path(task.source_path) if task.source_path else None)
