"""Judging finished runs from disk: re-judge with another judge or representation, or
judge runs imported from OSWorld's results layout.

Only rollouts that ended by the agent's doing (done, failed, a budget) are candidates;
rollouts lost to the world (environment lost, errors) are left out, as are running
ones. Evaluator scores on disk are never shown to a judge. Facts come from the cache
when the run was narrated before, so re-judging makes no narrative call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from core.trajectory import AGENT_OUTCOMES, Narrative, RunLayout, Selection, TaskDir

from .judges import Judge
from .representations import Representer

__all__ = ["JudgedTask", "MissingTaskError", "judge_run", "judge_task"]


class MissingTaskError(FileNotFoundError):
    """A task folder without task.json: the instruction the judge needs is unknown."""


@dataclass
class JudgedTask:
    task_id: str
    selection: Selection
    narratives: list[Narrative] = field(default_factory=list)


async def judge_task(task_dir: TaskDir, representer: Representer, judge: Judge, *,
                     statuses: Collection[str] = AGENT_OUTCOMES, write: bool = True) -> JudgedTask:
    """Judge one task's finished rollouts; with `write`, store the narratives and
    ``selection.json`` beside them."""
    task = await asyncio.to_thread(task_dir.read_task)
    if task is None:
        raise MissingTaskError(f"{task_dir.path} has no task.json: write the task before judging it")
    headers = await asyncio.to_thread(task_dir.headers)
    chosen = [k for k, info in headers.items() if info is not None and info.status in statuses]
    rollouts = [task_dir.rollout(k) for k in chosen]
    narratives: list[Narrative] = []
    if representer.name == "narrative":
        builder = representer.builder()
        candidates = await representer.candidates(task.instruction, rollouts, builder=builder)
        narratives = [builder.narrative(k) for k in chosen]
    else:
        candidates = await representer.candidates(task.instruction, rollouts)
    selection = await judge(task.instruction, candidates)
    if write:
        def store() -> None:
            for narrative in narratives:
                task_dir.write_narrative(narrative)
            task_dir.write_selection(selection)

        await asyncio.to_thread(store)
    return JudgedTask(task_id=task.id, selection=selection, narratives=narratives)


async def judge_run(layout: RunLayout, representer: Representer, judge: Judge, *,
                    tasks: Sequence[str] | None = None, concurrency: int = 4,
                    statuses: Collection[str] = AGENT_OUTCOMES, write: bool = True) -> dict[str, JudgedTask]:
    """Judge every task of a run (or the named ones), `concurrency` tasks at a time."""
    task_ids = list(tasks) if tasks is not None else await asyncio.to_thread(layout.task_ids)
    slots = asyncio.Semaphore(max(1, concurrency))

    async def one(task_id: str) -> JudgedTask:
        async with slots:
            return await judge_task(layout.task(task_id), representer, judge, statuses=statuses, write=write)

    judged = await asyncio.gather(*(one(t) for t in task_ids))
    return {j.task_id: j for j in judged}
