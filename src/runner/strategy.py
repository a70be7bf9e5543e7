"""How a task is run: strategies over rollouts, and the executor that runs tasks.

A strategy is an async callable ``await strategy(run) -> TaskResult`` given a `TaskRun`
(the task, its folder, the pool, the models, the ledger, the step hooks). `single` runs one
rollout. Wider strategies (N rollouts and a judge, retry-until-success with a critic, step
guides) are built from the same piece, `run_rollout`: borrow an environment, prepare the
task, run one rollout, score it. They are chosen by name from `runner.strategies`, and
each answers, as a `BaseStrategy`, what the runner asks of it before a run (rollouts per
task, environments at once, model roles, checks, how it resumes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from core import clock
from core.atomic import is_disk_full
from core.llm import Ledger
from core.protocols import EnvError, Environment, EnvironmentLost
from core.trajectory import (
    WORLD_FAILURES,
    RolloutError,
    RolloutInfo,
    RolloutStatus,
    RunLayout,
    Task,
    TaskDir,
    TaskResult,
)

from .config import RunConfig
from .environments import EnvironmentPool
from .guided import guide_models, guided_config, make_chooser, tree_source
from .kept import single_result
from .models import ModelSet, make_worker, settled_config, spent_by
from .outcomes import RolloutResult, task_failure
from .recording import recorded
from .rollout import Rollout, StepHook
from .strategies import STRATEGIES

__all__ = [
    "BaseStrategy",
    "RolloutOutcome",
    "SingleRollout",
    "Strategy",
    "TaskRun",
    "check_strategy",
    "run_rollout",
    "run_tasks",
    "strategy_class",
    "task_errors",
]

_log = logging.getLogger(__name__)


@dataclass
class TaskRun:
    """Everything a strategy needs to run one task."""

    task: Task
    layout: RunLayout
    config: RunConfig
    pool: EnvironmentPool
    models: ModelSet
    ledger: Ledger
    hooks: list[StepHook] = field(default_factory=list)

    @property
    def task_dir(self) -> TaskDir:
        return self.layout.task(self.task.id)


@dataclass(frozen=True, slots=True)
class RolloutOutcome:
    """One rollout's result and the evaluator's score (None: not evaluated)."""

    index: int
    result: RolloutResult
    score: float | None
    #: Why there is no score although the task has a scorer: its setup or scorer failed.
    score_error: str | None = None

    @classmethod
    def from_header(cls, k: int, info: RolloutInfo) -> RolloutOutcome:
        """A finished rollout's outcome as its header recorded it (a resumed run keeps it)."""
        seconds = (info.ended_at - info.started_at) if info.ended_at is not None else 0.0
        result = RolloutResult(info.status, info.reason or "", info.step_count, None, seconds, 0.0)
        why = info.reason if info.status == "setup_failed" else info.score_error
        return cls(k, result, info.score, why)

    @property
    def error(self) -> RolloutError | None:
        """``setup_failed`` / ``scoring_failed`` with its one line, or None."""
        if self.result.status == "setup_failed":
            return RolloutError(outcome="setup_failed", reason=self.result.reason)
        if self.score_error is not None:
            return RolloutError(outcome="scoring_failed", reason=self.score_error)
        return None

    @property
    def shown_status(self) -> str:
        """The status to show: the agent's, or ``scoring_failed`` when its scorer failed."""
        return "scoring_failed" if self.error is not None and self.error.outcome == "scoring_failed" else self.result.status


class Strategy(Protocol):
    """A way to run a task (`runner.strategies` has them by name). ``outcomes`` holds, per
    task id, the rollout outcome that stands for the task (the list of them for strategies
    that keep several, as ``wide`` does)."""

    name: str
    outcomes: dict[str, Any]

    async def __call__(self, run: TaskRun) -> TaskResult: ...


class BaseStrategy:
    """What the runner asks a strategy's class before and around a run; the answers here are
    those of one rollout per task. A strategy of your own subclasses it (named by its
    ``name``, or by a dotted path ``package.module:Class``) and overrides what differs: the
    runner, the command line, the prices, the model checks and the report read the answers
    and never the strategy's name.
    """

    name: str
    #: Model roles it calls besides the worker's ("critic"; "narrator" and "judge" when the
    #: wide section's judge is not none): priced, checked and reported before a run.
    roles: ClassVar[tuple[str, ...]] = ()
    #: Its rollouts draw their policy from the wide section's mixture, decoding
    #: stochastically (``wide.temperature``), rather than the run's policy as configured.
    samples_mixture: ClassVar[bool] = False
    #: ``agent-s3 run`` shows its rollouts on a live board and summarizes the judge's pick;
    #: its constructor then takes ``watch=`` (the board's callback) and its instances keep
    #: what `runner.wide.WideScaling` keeps (``outcomes`` lists, ``selections``, ``aclose``).
    board: ClassVar[bool] = False
    #: A task is finished once its result is written (the strategy decides how many
    #: rollouts it makes, as retry does), not once `rollouts` rollouts are kept.
    finished_by_result: ClassVar[bool] = False
    #: A section of the run configuration only this strategy reads, and the options that set
    #: it: setting it under another strategy is refused.
    own_section: ClassVar[tuple[str, str] | None] = None

    @classmethod
    def rollouts(cls, cfg: RunConfig) -> int:
        """How many rollouts each task gets (a resumed run keeps that many)."""
        return 1

    @classmethod
    def width(cls, cfg: RunConfig) -> int:
        """How many environments one task uses at once (the pool holds this per task run at once)."""
        return 1

    @classmethod
    def check(cls, cfg: RunConfig) -> None:
        """Raise `ValueError` (one line) when `cfg` cannot run under this strategy, before any
        environment starts."""

    @classmethod
    def resuming(cls, cfg: RunConfig, **options: Any) -> Strategy:
        """The strategy that continues a run: what an earlier attempt finished is kept."""
        return cls(**options)  # type: ignore[return-value]


def strategy_class(cfg: RunConfig | str) -> type[BaseStrategy]:
    """The class of the strategy `cfg` (or the name) chooses."""
    return STRATEGIES.get(cfg if isinstance(cfg, str) else cfg.strategy)  # type: ignore[no-any-return]


def check_strategy(cfg: RunConfig) -> None:
    """Raise `ValueError` (one line) when the strategy's settings cannot run, or a section
    another strategy owns is set, before any environment starts."""
    chosen = strategy_class(cfg)
    for name in STRATEGIES.names():
        owned = STRATEGIES.get(name).own_section
        if owned is not None and owned != chosen.own_section and owned[0] in cfg.model_fields_set:
            raise ValueError(f"{owned[1]} need --strategy {name}")
    chosen.check(cfg)


async def run_rollout(run: TaskRun, k: int, env: Environment, *, seed: int | None = None,
                      models: ModelSet | None = None) -> RolloutOutcome:
    """Prepare the task in `env`, run rollout `k` there, and score it.

    A setup that fails ends the rollout ``setup_failed`` before the agent starts; a scorer
    that fails leaves the agent's outcome and records ``score_error`` (``scoring_failed``). Either is one line naming the task, the step and the cause, never a score and
    never a traceback on the terminal (an unexpected error's traceback goes to the log)."""
    task, layout = run.task, run.layout
    tags = {"run": layout.run_id, "task": task.id, "rollout": k}
    tagged = (models or run.models).tagged(**tags)
    rd = layout.rollout(task.id, k)
    cache = run.task_dir.path / "evaluation" / f"rollout-{k}"
    info = RolloutInfo(run_id=layout.run_id, task_id=task.id, rollout=k, model=tagged.policy.name,
                       seed=seed, environment=env.name, started_at=clock.now(), label=run.config.label)
    try:
        await env.prepare_task(task, cache)
    except Exception as e:
        if is_disk_full(e):
            raise
        status: RolloutStatus = "environment_lost" if isinstance(e, EnvironmentLost) else "setup_failed"
        reason = task_failure(task.id, "setup", e)
        _log.info("%s", reason, exc_info=not isinstance(e, EnvError))  # the run's log keeps a bug's traceback
        await asyncio.to_thread(rd.start, info)
        await asyncio.to_thread(rd.finish, status, reason)
        return RolloutOutcome(k, RolloutResult(status, reason, 0, None, 0.0, 0.0), None,
                              reason if status == "setup_failed" else None)
    info = info.model_copy(update={"network": (await env.worker_facts()).network})  # recorded in rollout.json
    guide_model, pointer = guide_models(run.models, tagged, tags)
    cfg = await settled_config(guided_config(run.config), env)  # the environment's own facts
    worker = make_worker(cfg, tagged, env)
    rollout = Rollout(
        env=env,
        worker=worker,
        instruction=task.instruction,
        rollout_dir=rd,
        info=info,
        config=run.config.rollout,
        max_steps=task.max_steps,
        spent=lambda: spent_by(run.ledger, **tags),
        hooks=run.hooks,
        chooser=make_chooser(run.config, worker, guide_model, seed=seed, pointer=pointer, tree=tree_source(env)),
    )
    async with recorded(env, rd.path, enabled=run.config.rollout.record):
        result = await rollout.run()
        if result.status in WORLD_FAILURES:
            return RolloutOutcome(k, result, None, None)
        try:
            score = await env.score_task(task, cache, last_action=result.last_action)
        except Exception as e:
            if is_disk_full(e):
                raise
            return await _scoring_failed(run, k, result, e)
    if score is not None:
        header = await asyncio.to_thread(rd.read_info)
        if header is not None:
            await asyncio.to_thread(rd.write_info, header.model_copy(update={"score": score}))
    return RolloutOutcome(k, result, score)


async def _scoring_failed(run: TaskRun, k: int, result: RolloutResult, exc: Exception) -> RolloutOutcome:
    """The rollout when its scorer failed: the agent's outcome is kept and the header's
    `score_error` says why there is no score (``scoring_failed``), so a judge or critic sees the
    rollout as it ended; an environment that died meanwhile makes it ``environment_lost``."""
    reason = task_failure(run.task.id, "scoring", exc)
    _log.info("%s", reason, exc_info=not isinstance(exc, EnvError))
    rd = run.layout.rollout(run.task.id, k)
    header = await asyncio.to_thread(rd.read_info)
    if isinstance(exc, EnvironmentLost):
        lost = f"environment lost while scoring: {reason}"
        if header is not None:
            await asyncio.to_thread(rd.write_info, header.model_copy(update={"status": "environment_lost",
                                                                              "reason": lost}))
        return RolloutOutcome(k, dataclasses.replace(result, status="environment_lost", reason=lost), None)
    if header is not None:
        await asyncio.to_thread(rd.write_info, header.model_copy(update={"score_error": reason}))
    return RolloutOutcome(k, result, None, reason)


def task_errors(outcomes: Iterable[RolloutOutcome]) -> dict[int, RolloutError]:
    """The outcomes whose task setup or scorer failed, for `TaskResult.errors`."""
    found = {o.index: o.error for o in outcomes}
    return {k: e for k, e in found.items() if e is not None}


class SingleRollout(BaseStrategy):
    """One rollout of the task; its score is the task's."""

    name = "single"

    @classmethod
    def resuming(cls, cfg: RunConfig, **options: Any) -> Strategy:
        return _ResumingSingle(**options)

    def __init__(self) -> None:
        self.outcomes: dict[str, RolloutOutcome] = {}

    async def __call__(self, run: TaskRun) -> TaskResult:
        await asyncio.to_thread(run.task_dir.write_task, run.task)
        env = await run.pool.acquire()
        try:
            outcome = await run_rollout(run, 0, env, seed=run.config.seed)
        finally:
            run.pool.release(env)
        self.outcomes[run.task.id] = outcome
        result = TaskResult.from_scores(run.task.id, {0: outcome.score}, selected=0, errors=task_errors([outcome]))
        await asyncio.to_thread(run.task_dir.write_result, result)
        return result


class _ResumingSingle(SingleRollout):
    """One rollout; a rollout 0 finished by an earlier attempt of the run is kept."""

    async def __call__(self, run: TaskRun) -> TaskResult:
        kept = await asyncio.to_thread(single_result, run.layout, run.task)
        if kept is None:
            return await super().__call__(run)
        await asyncio.to_thread(run.task_dir.write_result, kept)
        return kept


async def run_tasks(
    tasks: Sequence[Task],
    strategy: Strategy,
    make_run: Callable[[Task], TaskRun],
    *,
    concurrency: int = 1,
    on_result: Callable[[Task, TaskResult | BaseException], Awaitable[None]] | None = None,
) -> list[TaskResult | BaseException]:
    """Run `strategy` over `tasks`, at most `concurrency` at once; one task's error does
    not stop the others (it is returned in that task's place)."""
    slots = asyncio.Semaphore(max(concurrency, 1))

    async def one(task: Task) -> TaskResult | BaseException:
        async with slots:
            try:
                out: TaskResult | BaseException = await strategy(make_run(task))
            except Exception as e:
                if is_disk_full(e):
                    _log.error("task %s failed: %s", task.id, e)
                else:
                    _log.exception("task %s failed", task.id)
                out = e
        if on_result is not None:
            await on_result(task, out)
        return out

    return list(await asyncio.gather(*(one(t) for t in tasks)))
