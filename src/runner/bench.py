"""Benchmarks: every task of an OSWorld task list (or the local suite) under one strategy.

`load_bench_tasks` reads the list and the task files, keeps a domain and a count, and sets
aside (with their gaps) tasks whose setup steps, getters or metrics this runner cannot run.
`run_bench` runs the rest, resumable (see `runner.resume`): tasks already finished are
skipped, a wide task re-runs only its missing rollouts, then its judge. Each task's
result.json is written as it ends; the run's metrics go to ``summary.json`` at its root.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.config import dump_config
from core.llm import Ledger
from core.trajectory import RunLayout, Task, TaskResult
from environments.tasks import SUITE_DIR, load_task_list, task_gaps

from .comparability import record_environment
from .config import RunConfig
from .executors import open_environments
from .metrics import BenchMetrics, compute_metrics, write_metrics
from .models import ModelSet, settled_config
from .resume import BenchManifest, check_resume, task_finished, write_manifest
from .strategy import Strategy, TaskRun, run_tasks, strategy_class

__all__ = ["LOCAL_LIST", "BenchRun", "BenchTasks", "load_bench_tasks", "resuming_strategy", "rollouts_per_task",
           "run_bench"]

_log = logging.getLogger(__name__)

#: The local suite's task list (OSWorld's list format).
LOCAL_LIST = SUITE_DIR / "test_local.json"


@dataclass
class BenchTasks:
    """The tasks to run, each with its domain, and those set aside with their gaps."""

    tasks: list[Task] = field(default_factory=list)
    domains: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)


def load_bench_tasks(list_file: Path, examples: Path | None = None, *, domain: str | None = None,
                     limit: int | None = None, check_gaps: bool = True) -> BenchTasks:
    """The runnable tasks of `list_file` (files under `examples`, default ``examples``
    beside the list), of one `domain` if given, at most `limit` of them. `check_gaps`
    false keeps tasks whose metric this machine lacks (environments that score themselves)."""
    out = BenchTasks()
    for task in load_task_list(list_file, examples):
        if domain is not None and task.domain != domain:
            continue
        gaps = task_gaps(task) if check_gaps else []
        if gaps:
            out.skipped[task.id] = gaps
            continue
        if limit is not None and len(out.tasks) >= limit:
            break
        out.tasks.append(task)
        out.domains[task.id] = task.domain
    return out


def rollouts_per_task(cfg: RunConfig) -> int:
    """N: rollouts each task gets, as its strategy says (retry counts its attempts itself)."""
    return strategy_class(cfg).rollouts(cfg)


def resuming_strategy(cfg: RunConfig) -> Strategy:
    """The strategy that continues a run: finished rollouts are kept, the rest run."""
    return strategy_class(cfg).resuming(cfg)


@dataclass
class BenchRun:
    """What one invocation did: tasks run now, tasks kept from before, errors, metrics."""

    layout: RunLayout
    ran: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    resumed: bool = False
    metrics: BenchMetrics | None = None


OnTask = Callable[[Task, TaskResult | BaseException], Awaitable[None]]


async def run_bench(cfg: RunConfig, bench: BenchTasks, layout: RunLayout, models: ModelSet, ledger: Ledger, *,
                    suite: str, identity: dict[str, object], concurrency: int = 1,
                    on_task: OnTask | None = None) -> BenchRun:
    """Run (or resume) the benchmark in `layout`; raises `ResumeMismatch` before any work
    when the run folder holds a run made with other settings."""
    manifest = check_resume(layout, suite, identity)
    out = BenchRun(layout, resumed=manifest is not None)
    if manifest is None:
        seed = cfg.wide.seed if cfg.wide.seed is not None else random.SystemRandom().randrange(2**30)
        manifest = BenchManifest(suite=suite, identity=identity, domains=bench.domains,
                                 skipped=bench.skipped, seed=seed)
        await asyncio.to_thread(write_manifest, layout, manifest)
    else:
        await asyncio.to_thread(layout.remove_temporaries)
    cfg = cfg.model_copy(update={"wide": cfg.wide.model_copy(update={"seed": manifest.seed})})
    n = rollouts_per_task(cfg)
    pending: list[Task] = []
    for task in bench.tasks:
        if strategy_class(cfg).finished_by_result:  # it decides its own attempts: resumed per task
            done = await asyncio.to_thread(layout.task(task.id).read_result) is not None
        else:
            done = await asyncio.to_thread(task_finished, layout, task, n)
        if done:
            out.kept.append(task.id)
        else:
            pending.append(task)
    if pending:
        await _run(cfg, pending, layout, models, ledger, out, concurrency, on_task)
    else:
        await models.aclose()
    out.metrics = await asyncio.to_thread(compute_metrics, layout, manifest.domains)
    await asyncio.to_thread(write_metrics, layout, out.metrics)
    return out


async def _run(cfg: RunConfig, pending: list[Task], layout: RunLayout, models: ModelSet, ledger: Ledger,
               out: BenchRun, concurrency: int, on_task: OnTask | None) -> None:
    width = strategy_class(cfg).width(cfg)
    strategy = resuming_strategy(cfg)
    hide = (str(cfg.out_dir.resolve()),)

    async def landed(task: Task, result: TaskResult | BaseException) -> None:
        if isinstance(result, BaseException):
            out.errors[task.id] = f"{type(result).__name__}: {result}"[:300]
        else:
            out.ran.append(task.id)
        if on_task is not None:
            await on_task(task, result)

    try:
        async with open_environments(cfg, size=width * max(concurrency, 1), hide=hide,
                                     run_id=layout.run_id) as pool:
            env = await pool.acquire()
            try:
                facts = await env.worker_facts()  # the run's label comes from its environment
                await asyncio.to_thread(record_environment, layout, facts)
                if layout.read_config() is None:
                    shown = await settled_config(cfg, env)
                    await asyncio.to_thread(layout.write_config, dump_config(shown))
            finally:
                pool.release(env)

            def make_run(task: Task) -> TaskRun:
                return TaskRun(task=task, layout=layout, config=cfg, pool=pool, models=models, ledger=ledger)

            await run_tasks(pending, strategy, make_run, concurrency=concurrency, on_result=landed)
    finally:
        close = getattr(strategy, "aclose", None)
        if close is not None:
            await close()
        await models.aclose()
