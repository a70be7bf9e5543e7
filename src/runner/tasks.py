"""What ``--task`` names: a task file, a task id of the local suite, or a plain instruction."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from core.trajectory import Task
from environments.tasks import TaskFileError, load_suite, load_task
from environments.tasks.convert import to_core_task

__all__ = ["resolve_task"]

_ID_LIKE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def resolve_task(spec: str) -> Task:
    """The task `spec` names. A path ending in .json is a task file; a word that is a
    local-suite id is that task; anything with a space is a free-text instruction.

    Raises `TaskFileError` with one line saying what to do.
    """
    spec = spec.strip()
    if not spec:
        raise TaskFileError("--task is empty; pass a task file, a local-suite task id or an instruction")
    path = Path(spec).expanduser()
    if spec.endswith(".json") or path.is_file():
        if not path.is_file():
            raise TaskFileError(f"{spec}: no such task file")
        return to_core_task(load_task(path))
    suite = {task.id: task for task in load_suite()}
    if spec in suite:
        return to_core_task(suite[spec])
    if _ID_LIKE.match(spec):
        known = ", ".join(sorted(suite))
        raise TaskFileError(
            f"{spec!r} is neither a task file nor a local-suite task id ({known}); "
            "quote a whole sentence to give a free-text instruction"
        )
    digest = hashlib.sha256(spec.encode()).hexdigest()[:10]
    return Task(id=f"instruction-{digest}", instruction=spec, snapshot="blank")
