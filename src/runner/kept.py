"""Which rollouts of a run an earlier attempt finished: what resuming keeps and what it redoes.

The unit of resumption is the rollout (an environment's state cannot be restored mid-way):
a rollout whose header is terminal and, for a task with an evaluator, scored is kept; one
still ``running``, never started, ended by the world, or ended unscored is redone from the
task's snapshot (so a task whose setup or scorer failed is tried again). The strategies ask
this (their resuming variants) and so does `runner.resume` (a benchmark's manifest).
"""

from __future__ import annotations

from core.trajectory import (
    AGENT_OUTCOMES,
    RolloutDir,
    RolloutInfo,
    RunFolderError,
    RunLayout,
    Task,
    TaskResult,
    plan_resume,
    rollout_errors,
)

__all__ = ["kept", "pending_rollouts", "single_result", "task_finished", "whole_header"]


def kept(info: RolloutInfo | None, task: Task) -> bool:
    """Whether a rollout with header `info` is finished for good (resuming keeps it)."""
    if info is None or not info.finished:
        return False
    if info.status in AGENT_OUTCOMES and task.evaluator and info.score is None:
        return False  # killed between the rollout's end and its evaluation
    return info.status != "setup_failed"  # not set up yet: try again (a failed scorer is redone above)


def whole_header(rd: RolloutDir) -> RolloutInfo | None:
    """The header of a rollout whose files are whole; None (redo it) when they are damaged."""
    try:
        info = rd.read_info()
        rd.check_complete()
    except RunFolderError:
        return None  # plan_resume has said why
    return info


def pending_rollouts(layout: RunLayout, task: Task, n: int) -> list[int]:
    """Rollouts 0..n-1 of `task` that must (still) run: not started, interrupted, lost to
    the world, or never evaluated."""
    plan = plan_resume(layout, [task.id], n, redo_world_failures=True)[task.id]
    task_dir = layout.task(task.id)
    return sorted(plan.redo + [k for k in plan.finished if not kept(task_dir.rollout(k).read_info(), task)])


def task_finished(layout: RunLayout, task: Task, n: int) -> bool:
    """Whether `task` has its result and every one of its n rollouts is kept."""
    return layout.task(task.id).read_result() is not None and not pending_rollouts(layout, task, n)


def single_result(layout: RunLayout, task: Task) -> TaskResult | None:
    """The result of a one-rollout task whose rollout 0 is kept (None: it must run)."""
    if pending_rollouts(layout, task, 1):
        return None
    info = layout.task(task.id).rollout(0).read_info()
    assert info is not None
    return TaskResult.from_scores(task.id, {0: info.score}, selected=0, errors=rollout_errors({0: info}))
