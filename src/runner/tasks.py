"""What ``--task`` names: a task file, a task id of the local or Android suite, or a plain
instruction."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from core.protocols import Platform
from core.trajectory import Task
from environments.tasks import TaskFileError, load_suite, load_task
from environments.tasks.android_suite import android_task
from environments.tasks.convert import to_core_task

from .android import android_suite

__all__ = ["resolve_task"]

_ID_LIKE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def resolve_task(spec: str, *, platform: Platform | None = None) -> Task:
    """The task `spec` names. A path ending in .json is a task file; a word that is a
    local-suite id is that task; anything with a space is a free-text instruction.
    With ``platform="android"`` a task file or instruction is an Android task (platform,
    step budget from its complexity).

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
        return android_task(loaded) if platform == "android" else to_core_task(loaded)
    suite = {task.id: task for task in load_suite()}
    if spec in suite:
        return to_core_task(suite[spec])
    phone = android_suite()
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
    if platform == "android":
        return Task(id=f"instruction-{digest}", instruction=spec, platform="android")
    return Task(id=f"instruction-{digest}", instruction=spec, snapshot="blank")
