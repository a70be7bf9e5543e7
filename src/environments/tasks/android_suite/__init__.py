"""Android tasks in OSWorld's format, checked with adb shell commands.

Each task is an instruction plus checks: a `vm_command_line` getter whose command runs in
the device's shell (through `environments.android.AdbTaskClient`) and a metric comparing its
output (``exact_match``, ``check_include_exclude``), so the desktop suite's evaluator scores
them unchanged. ``snapshot`` names the emulator snapshot to revert to; ``complexity`` gives
AndroidWorld's step budget, 10 × complexity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.protocols import Platform
from core.trajectory import Task
from environments.tasks.loader import load_task_list

__all__ = [
    "ANDROID_SUITE_DIR",
    "ANDROID_SUITE_LIST",
    "android_suite_tasks",
    "android_task",
    "load_android_suite",
    "platform_task",
    "step_budget",
]

ANDROID_SUITE_DIR = Path(__file__).resolve().parent
ANDROID_SUITE_LIST = ANDROID_SUITE_DIR / "test_android.json"


def load_android_suite() -> list[Task]:
    """Every task of the Android suite, in list order."""
    return load_task_list(ANDROID_SUITE_LIST)


def _complexity(task: Task) -> Any:
    return task.extra.get("complexity", task.complexity)


def step_budget(task: Task) -> int | None:
    """AndroidWorld's budget: ``int(10 * complexity)``; None when the task gives no complexity."""
    value = _complexity(task)
    if value is None:
        return None
    try:
        complexity = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"task {task.id}: complexity {value!r} is not a number") from None
    if complexity <= 0:
        raise ValueError(f"task {task.id}: complexity must be positive, got {complexity}")
    return max(1, int(10 * complexity))


def platform_task(task: Task, platform: Platform) -> Task:
    """`task` for `platform`; a task giving AndroidWorld's complexity gets its step budget
    from it."""
    budget = step_budget(task)
    update: dict[str, Any] = {"platform": platform} | ({"max_steps": budget} if budget is not None else {})
    return task.model_copy(update=update)


def android_task(task: Task) -> Task:
    """The run record of an Android task: platform android, step budget from its complexity."""
    return platform_task(task, "android")


def android_suite_tasks() -> dict[str, Task]:
    """The Android suite's tasks by id, each with its platform and AndroidWorld's step budget."""
    return {task.id: android_task(task) for task in load_android_suite()}
