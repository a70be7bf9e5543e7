"""Checking tasks before spending money: set each one up, score it untouched, say what happened.

For every task, on any environment (through `Environment.prepare_task` and `score_task`
only): revert and run its setup steps, then run its scorer on the state the setup left, with
no agent and no model. A task whose setup or scorer fails would be an error in a benchmark,
never a score; a task that scores 1 untouched is *flagged*: it cannot tell an agent that did
the work from one that did nothing on this environment (a default the desktop already has,
say). An ``infeasible`` task is scored as if the agent had ended without FAIL, so 0.

`check_tasks` runs the checks at most `concurrency` at once on environments borrowed from a
pool (a local pool starts only as many desktops as the machine has room for; the rest wait).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from core.atomic import is_disk_full
from core.protocols import EnvError, Environment, EnvironmentLost
from core.trajectory import Task, check_name

from .environments import EnvironmentPool
from .outcomes import task_failure

__all__ = ["CheckOutcome", "CheckSummary", "TaskCheck", "check_one", "check_tasks", "summarize_checks"]

_log = logging.getLogger(__name__)

#: ``ok``: set up and scored 0 < 1 untouched; ``flagged``: scored 1 untouched; ``no_scorer``:
#: set up, nothing to score; the rest are errors.
CheckOutcome = Literal["ok", "flagged", "no_scorer", "setup_failed", "scoring_failed", "environment_lost", "skipped"]
#: Outcomes that mean a task could not be set up or scored here.
ERRORS: frozenset[str] = frozenset({"setup_failed", "scoring_failed", "environment_lost"})


@dataclass
class TaskCheck:
    """One task's check: whether its setup and scorer ran, its score untouched, how long."""

    task_id: str
    domain: str
    outcome: CheckOutcome
    #: Setup steps ran (None: not tried).
    setup_ok: bool | None = None
    #: The scorer ran (None: not tried, or the task has none).
    scorer_ok: bool | None = None
    #: The score of doing nothing (None: no score).
    score: float | None = None
    setup_seconds: float = 0.0
    score_seconds: float = 0.0
    #: One line naming the task, the step and the cause, for errors and skipped tasks.
    reason: str | None = None
    infeasible: bool = False
    environment: str | None = None

    @property
    def seconds(self) -> float:
        return self.setup_seconds + self.score_seconds

    @property
    def errored(self) -> bool:
        return self.outcome in ERRORS

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


def _infeasible(task: Task) -> bool:
    return task.evaluator is not None and task.evaluator.func == "infeasible"


def _failed(check: TaskCheck, phase: str, task: Task, exc: Exception) -> TaskCheck:
    lost = isinstance(exc, EnvironmentLost)
    check.outcome = "environment_lost" if lost else ("setup_failed" if phase == "setup" else "scoring_failed")
    check.reason = task_failure(task.id, phase, exc)
    _log.info("%s", check.reason, exc_info=not isinstance(exc, EnvError))  # a bug's traceback: the log only
    return check


async def check_one(env: Environment, task: Task, domain: str, cache_dir: Path) -> TaskCheck:
    """Set `task` up on `env` and score it untouched; never raises for the task's own failures."""
    check = TaskCheck(task.id, domain, "ok", infeasible=_infeasible(task), environment=env.name)
    t0 = time.perf_counter()
    try:
        await env.prepare_task(task, cache_dir)
    except Exception as e:
        if is_disk_full(e):
            raise
        check.setup_seconds = time.perf_counter() - t0
        check.setup_ok = False
        return _failed(check, "setup", task, e)
    check.setup_seconds = time.perf_counter() - t0
    check.setup_ok = True
    if not task.evaluator:
        check.outcome = "no_scorer"
        return check
    t1 = time.perf_counter()
    try:
        score = await env.score_task(task, cache_dir, last_action=None)
    except Exception as e:
        if is_disk_full(e):
            raise
        check.score_seconds = time.perf_counter() - t1
        check.scorer_ok = False
        return _failed(check, "scoring", task, e)
    check.score_seconds = time.perf_counter() - t1
    check.scorer_ok = True
    check.score = score
    if score is None:
        check.outcome = "no_scorer"
    elif score >= 1.0 - 1e-9:
        check.outcome = "flagged"
        check.reason = "scores 1 with nothing done: this environment cannot tell a solved task from an untouched one"
    return check


OnCheck = Callable[[TaskCheck], Awaitable[None]]


async def check_tasks(tasks: Sequence[tuple[Task, str]], pool: EnvironmentPool, folder: Path, *,
                      concurrency: int = 1, retries: int = 1, on_check: OnCheck | None = None) -> list[TaskCheck]:
    """Check every (task, domain) at most `concurrency` at once; files the scorers fetch go
    under ``folder/<task>/evaluation``. A task whose environment died is checked again on a
    fresh one up to `retries` times. Results come back in the tasks' order."""
    slots = asyncio.Semaphore(max(concurrency, 1))

    async def one(task: Task, domain: str) -> TaskCheck:
        async with slots:
            for attempt in range(retries + 1):
                env = await pool.acquire()
                try:
                    check = await check_one(env, task, domain, folder / check_name("task id", task.id) / "evaluation")
                finally:
                    pool.release(env)  # a dead environment is replaced on its next loan
                if check.outcome != "environment_lost" or attempt == retries:
                    break
                _log.warning("task %s: the environment was lost (%s); checking it again", task.id, check.reason)
        if on_check is not None:
            await on_check(check)
        return check

    return list(await asyncio.gather(*(one(t, d) for t, d in tasks)))


@dataclass
class CheckSummary:
    """Counts over the checks: tried, set up, scored, flagged, errored by outcome, skipped."""

    tried: int
    set_up: int
    scored: int
    flagged: int
    errored: dict[str, int]
    skipped: int
    seconds: float

    @property
    def ok(self) -> bool:
        """Every task tried set up, and every one with a scorer was scored."""
        return not self.errored

    def line(self) -> str:
        errors = sum(self.errored.values())
        detail = f" ({', '.join(f'{k} {n}' for k, n in sorted(self.errored.items()))})" if errors else ""
        skipped = f"; skipped {self.skipped} that cannot run anywhere" if self.skipped else ""
        return (f"checked {self.tried} tasks: set up {self.set_up}, scored {self.scored}, flagged {self.flagged} "
                f"(score 1 untouched), errored {errors}{detail}{skipped}; {self.seconds:.0f} s")


def summarize_checks(checks: Sequence[TaskCheck], seconds: float) -> CheckSummary:
    tried = [c for c in checks if c.outcome != "skipped"]
    return CheckSummary(
        tried=len(tried),
        set_up=sum(bool(c.setup_ok) for c in tried),
        scored=sum(bool(c.scorer_ok) for c in tried),
        flagged=sum(c.outcome == "flagged" for c in tried),
        errored=dict(Counter(c.outcome for c in tried if c.errored)),
        skipped=len(checks) - len(tried),
        seconds=seconds,
    )
