"""What ``--task`` names: a task file, a task id of the local or Android suite, or a plain
instruction; and whether the run's environment kind can run it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from core.protocols import Platform
from core.trajectory import Task
from environments.kinds import get_kind, kinds
from environments.tasks import TaskFileError, load_suite, load_task
from environments.tasks.android_suite import android_suite_tasks, platform_task

__all__ = ["check_task_platform", "resolve_task"]

_ID_LIKE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def resolve_task(spec: str, *, platform: Platform = "ubuntu") -> Task:
    """The task `spec` names. A path ending in .json is a task file; a word that is a
    local- or Android-suite id is that task; anything with a space is a free-text
    instruction. A task file or instruction is a task for `platform` (the run's environment
    kind's); one that gives AndroidWorld's complexity gets its step budget from it.

    Raises `TaskFileError` with one line saying what to do.
    """
    spec = spec.strip()
    if not spec:
        raise TaskFileError("--task is empty; pass a task file, a local-suite task id or an instruction")
    path = Path(spec).expanduser()
    if spec.endswith(".json") or path.is_file():
        if not path.is_file():
            raise TaskFileError(f"{spec}: no such task file")
        loaded = load_task(path)
        return platform_task(loaded, platform)
    suite = {task.id: task for task in load_suite()}
    if spec in suite:
        return suite[spec]
    phone = android_suite_tasks()
    if spec in phone:
        return phone[spec]
    if _ID_LIKE.match(spec):
        known = ", ".join(sorted(suite))
        raise TaskFileError(
            f"{spec!r} is neither a task file nor a task id of the local suite ({known}) or the "
            f"Android suite ({', '.join(sorted(phone))}); "
            "quote a whole sentence to give a free-text instruction"
        )
    digest = hashlib.sha256(spec.encode()).hexdigest()[:10]
    return Task(id=f"instruction-{digest}", instruction=spec, platform=platform, snapshot="blank")


def check_task_platform(kind: str, task: Task) -> None:
    """Raise ValueError (one line) when environments of `kind` cannot run `task`'s platform."""
    serves = get_kind(kind).platforms
    if task.platform in serves:
        return
    able = [k.name for k in kinds() if task.platform in k.platforms]
    instead = f"pass --env {' or '.join(able)}" if able else "no environment kind runs it"
    raise ValueError(
        f"task {task.id} is for {task.platform}, and --env {kind} runs {', '.join(serves)} tasks: {instead}"
    )
