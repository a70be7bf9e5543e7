"""What ``agent-s3 run`` does with a run id that already has a folder: refuse, resume or replace.

Writing a second run into an existing folder would overwrite some rollouts, leave others of
the first run standing in ``report.html`` and mix both runs' calls in one ledger, so an
existing, non-empty folder is refused unless the user says which they mean: ``--resume``
(keep what the run finished, redo the rest, as ``agent-s3 bench`` does by run id) or
``--overwrite`` (delete the folder and start afresh).
"""

from __future__ import annotations

import shutil
from typing import Literal

from core.trajectory import RunLayout

__all__ = ["FolderUse", "RunFolderChoice", "check_run_folder", "open_run_folder"]

#: What to do with the run folder: make it, continue it, or replace it.
FolderUse = Literal["new", "resume", "overwrite"]


class RunFolderChoice(ValueError):
    """The run folder cannot be used as asked; the message says which option to pass."""


def check_run_folder(layout: RunLayout, task_id: str, strategy: str, *, resume: bool,
                     overwrite: bool) -> FolderUse:
    """How `layout` will be used by a run of `task_id`; changes nothing on disk.

    Raises `RunFolderChoice` (one line) when the folder exists and neither option was
    given, when both were, when ``--resume`` finds no run or a run of another task or
    strategy, and when the folder is a symbolic link (never followed, never deleted).
    ``--resume`` of a run killed before it wrote ``config.json`` starts it (there is nothing
    to keep).
    """
    if resume and overwrite:
        raise RunFolderChoice("pass --resume or --overwrite, not both")
    path = layout.path
    if path.is_symlink():
        raise RunFolderChoice(f"{path} is a symbolic link: pass another --run-id or --out")
    exists = path.is_dir() and any(path.iterdir())
    if resume and path.is_dir() and not _started(layout):
        return "new"  # a run killed before it wrote its configuration: it starts now
    if not exists:
        if resume:
            raise RunFolderChoice(f"there is no run {layout.run_id} in {layout.root} to resume: "
                                  "drop --resume, or pass the --out and --run-id of the run")
        return "new"
    if overwrite:
        return "overwrite"
    if not resume:
        raise RunFolderChoice(
            f"run folder {path} already exists: pass --resume to continue that run, --overwrite to "
            "replace it, or another --run-id"
        )
    _check_same_run(layout, task_id, strategy)
    return "resume"


def open_run_folder(layout: RunLayout, use: FolderUse) -> None:
    """Act on `check_run_folder`'s answer once the run is sure to start: delete the old
    folder for ``overwrite``; make the folder 0700 (again) in every case."""
    if use == "overwrite" and layout.path.is_dir() and not layout.path.is_symlink():
        shutil.rmtree(layout.path)
    layout.create()


def _started(layout: RunLayout) -> bool:
    """Whether the run in `layout` got as far as its configuration or any task's folder."""
    return (layout.path / "config.json").exists() or bool(layout.task_ids())


def _check_same_run(layout: RunLayout, task_id: str, strategy: str) -> None:
    """Refuse to resume a run made for another task or with another strategy."""
    others = [t for t in layout.task_ids() if t != task_id]
    if others:
        raise RunFolderChoice(f"run {layout.run_id} ran task {others[0]}, not {task_id}: "
                              "resume it with the same --task, or pass another --run-id")
    config = layout.read_config() or {}
    was = config.get("strategy")
    if was is not None and was != strategy:
        raise RunFolderChoice(f"run {layout.run_id} used strategy {was}, not {strategy}: "
                              f"resume it with --strategy {was}, or pass another --run-id")
