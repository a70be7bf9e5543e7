"""Critics over whole runs: which rollouts to grade, and exporting the accepted ones.

These are the pieces of the ``critic`` and ``filter`` commands that are about data: the
command line itself lives in the runner.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from pathlib import Path

from core.trajectory import AGENT_OUTCOMES, TERMINAL_STATUSES, RolloutDir, RunLayout, Task

from .grading import Graded

__all__ = ["export_accepted", "run_items"]


def run_items(run: RunLayout, *, include_world_failures: bool = False) -> list[tuple[str, Task, RolloutDir]]:
    """``(task_id/rollout-k, task, rollout)`` for every finished rollout of a run.

    Rollouts still ``running`` are left out; so are those the world ended (a lost
    environment, persistent errors) unless `include_world_failures`, since they say
    nothing about the agent. A task folder without ``task.json`` is an error: the critic
    needs the instruction.
    """
    if not run.path.is_dir():
        raise FileNotFoundError(f"{run.path} is not a run folder: give the folder a run wrote (runs/<run_id>)")
    keep = TERMINAL_STATUSES if include_world_failures else AGENT_OUTCOMES
    items: list[tuple[str, Task, RolloutDir]] = []
    for task_id in run.task_ids():
        task_dir = run.task(task_id)
        headers = {k: h for k, h in task_dir.headers().items() if h is not None and h.status in keep}
        if not headers:
            continue
        task = task_dir.read_task()
        if task is None:
            raise FileNotFoundError(f"{task_dir.path / 'task.json'} is missing: the critic needs the task's instruction")
        items.extend((f"{task_id}/rollout-{k}", task, task_dir.rollout(k)) for k in sorted(headers))
    return items


def _copy_one(graded: Graded, out: RunLayout) -> Path:
    source = graded.path
    task_id = source.parent.name
    target_task = out.task(task_id)
    target_task.path.mkdir(parents=True, exist_ok=True)
    task_file = source.parent / "task.json"
    if task_file.is_file() and not (target_task.path / "task.json").exists():
        shutil.copy2(task_file, target_task.path / "task.json")
    target = target_task.path / source.name
    if target.exists():
        shutil.rmtree(target)
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(source, partial)
    partial.rename(target)  # a killed export leaves a hidden partial folder, never half a rollout
    return target


async def export_accepted(graded: Sequence[Graded], out: RunLayout) -> list[Path]:
    """Copy the rollouts the critic accepted into `out`, as a run of their own.

    Each lands at ``<out>/<task_id>/rollout-<k>/`` with its verdict file, beside the task's
    ``task.json``, so the export reads like any run. Returns the folders written.
    """
    accepted = [g for g in graded if g.accepted]
    return [await asyncio.to_thread(_copy_one, g, out) for g in accepted]
