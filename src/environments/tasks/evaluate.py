"""Set up and score a task through OSWorld's own code; a score is a float in [0, 1].

Setup runs the task's `config` steps through OSWorld's `SetupController` (`steps`); scoring
follows OSWorld's `DesktopEnv.evaluate`: postconfig steps through the same controller, then
`infeasible` scores 1 iff the agent's last action was FAIL, otherwise a FAIL ends with 0; each
metric gets its states from OSWorld's getters (`getters`) and is OSWorld's function (`official`),
run in a confined worker as an unprivileged uid that sees the task's cache read-only
(`metric_sandbox`), since a task file's options reach whatever the metric does with them;
a list of metrics combines with `and` (0 at the first zero, else the mean) or `or` (1 at the
first one, else the max); a result getter that raises FileNotFoundError scores 0. Everything
the task needs is checked before anything runs, so an unsupported task fails fast with one
error. Unlike OSWorld, an `infeasible` task skips its postconfig (the score depends on the
last action alone), and a metric's score is clamped to [0, 1] with NaN as 0.

The target is an `Endpoint` (a server OSWorld's controllers reach as is) or any `TaskClient`,
reached through a door for the duration (`door.reach`).
"""

from __future__ import annotations

import asyncio
import functools
import math
from typing import Any

from core.trajectory import GetterSpec, MetricCall, Task
from environments.tasks.client import TaskClient
from environments.tasks.context import TaskContext
from environments.tasks.door import Endpoint, reach
from environments.tasks.errors import TaskError, TaskRunError, UnsupportedGetter, UnsupportedMetric
from environments.tasks.getters import OfficialEnv, get_state, getter_refusal, official_env
from environments.tasks.metric_sandbox import MetricSandbox, Missing
from environments.tasks.official import unsupported_reason
from environments.tasks.steps import check_steps, in_daemon_thread, run_steps

__all__ = ["check_evaluator", "evaluate", "run_setup"]


def check_evaluator(task: Task, endpoint: Endpoint | None = None) -> None:
    """Raise the first reason this task's evaluator cannot run here (or through `endpoint`)."""
    ctx_id = task.id
    for call in task.metric_calls():
        if call.func == "infeasible":
            continue
        reason = unsupported_reason(call.func)
        if reason is not None:
            raise UnsupportedMetric(ctx_id, call.func, reason)
        for spec in (call.result, call.expected):
            if spec is not None:
                refusal = getter_refusal(spec.type, endpoint)
                if refusal is not None:
                    raise UnsupportedGetter(ctx_id, spec.type, refusal)


def _check_task(ctx: TaskContext, endpoint: Endpoint) -> None:
    check_evaluator(ctx.task, endpoint)
    check_steps(ctx.task.evaluator.postconfig if ctx.task.evaluator else [], ctx, endpoint)
    check_steps(ctx.task.config, ctx, endpoint)


async def run_setup(target: TaskClient | Endpoint, ctx: TaskContext) -> list[str]:
    """Prepare the desktop for the task: its `config` steps, in order; returns a warning line
    for each command that ran but exited non-zero (`steps.run_steps`).

    The evaluator is checked first too, so a task that could never be scored fails before
    an agent spends a rollout on it.
    """
    async with reach(target) as endpoint:
        _check_task(ctx, endpoint)
        warnings = await run_steps(endpoint, ctx.task.config, ctx, phase="setup")
        _no_refusal(endpoint, ctx, "setup")
        return warnings


def _no_refusal(endpoint: Endpoint, ctx: TaskContext, phase: str) -> None:
    """A door refused part of the desktop's replies (too large, a redirect): OSWorld's code
    read that as a missing file or an error and went on, so what it computed is no result."""
    refused = endpoint.refusals()
    if refused:
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise TaskRunError(f"task {ctx.task_id}: {phase} failed: {refused[0]}{more}")


def _state(env: OfficialEnv, spec: GetterSpec | None, ctx: TaskContext, role: str) -> Any:
    """A getter's state; its failure is one `TaskRunError` naming the task, the getter and the
    cause (a missing result file stays FileNotFoundError: OSWorld scores it 0)."""
    try:
        return get_state(env, spec, ctx)
    except TaskError:
        raise
    except Exception as exc:
        if isinstance(exc, FileNotFoundError) and role == "result":
            raise
        kind = spec.type if spec is not None else None
        raise TaskRunError(f"task {ctx.task_id}: getter {kind!r} ({role}) failed: {type(exc).__name__}: {exc}") from exc


def _score(env: OfficialEnv, call: MetricCall, ctx: TaskContext, sandbox: MetricSandbox) -> float:
    """One metric on its getters' states, as `DesktopEnv.evaluate` calls it (blocking); the
    getters run here, the metric in the confined worker (`metric_sandbox`)."""
    try:
        result = _state(env, call.result, ctx, "result")
    except FileNotFoundError:
        return 0.0
    expected = _state(env, call.expected, ctx, "expected")
    args: tuple[Any, ...] = (result,) if call.expected is None else (result, expected)
    try:
        score = sandbox.call(call.func, args, dict(call.options))
    except Missing:
        return 0.0
    except TaskRunError as exc:
        raise TaskRunError(f"task {ctx.task_id}: {exc}") from None
    if score is None:
        raise TaskRunError(f"task {ctx.task_id}: metric {call.func!r} returned no score")
    if math.isnan(score):
        return 0.0
    return min(1.0, max(0.0, score))


def _combine(
    env: OfficialEnv, calls: list[MetricCall], conj: str, ctx: TaskContext, sandbox: MetricSandbox
) -> float:
    if len(calls) == 1:
        return _score(env, calls[0], ctx, sandbox)
    scores = []
    for call in calls:
        score = _score(env, call, ctx, sandbox)
        if conj == "and" and score == 0.0:
            return 0.0
        if conj == "or" and score == 1.0:
            return 1.0
        scores.append(score)
    return sum(scores) / len(scores) if conj == "and" else max(scores)


async def evaluate(
    target: TaskClient | Endpoint, ctx: TaskContext, *, last_action: str | None = None
) -> float:
    """Run postconfig, fetch the states and apply the metrics; `last_action` is e.g. ``"FAIL"``."""
    task = ctx.task
    evaluator = task.evaluator
    if evaluator is None:
        raise TaskRunError(f"task {task.id}: has no evaluator, so nothing scores it; give the task file one")
    failed = last_action is not None and last_action.strip().upper() == "FAIL"
    calls = evaluator.calls()
    if len(calls) == 1 and calls[0].func == "infeasible":
        check_evaluator(task)
        return 1.0 if failed else 0.0
    if any(call.func == "infeasible" for call in calls):
        raise UnsupportedMetric(task.id, "infeasible", "only valid as the single metric")
    async with reach(target) as endpoint:
        check_evaluator(task, endpoint)
        check_steps(evaluator.postconfig, ctx, endpoint)
        ctx.cache_dir.mkdir(parents=True, exist_ok=True)
        sandbox = MetricSandbox(ctx.cache_dir)
        try:
            if not failed:  # its modules load while postconfig and the getters run
                await asyncio.to_thread(sandbox.start, [call.func for call in calls])
            await run_steps(endpoint, evaluator.postconfig, ctx, phase="postconfig")
            _no_refusal(endpoint, ctx, "postconfig")
            if failed:
                return 0.0
            env = official_env(endpoint, ctx)
            try:
                score = await in_daemon_thread(
                    functools.partial(_combine, env, calls, evaluator.conj, ctx, sandbox),
                    what=f"task {task.id}: scoring",
                )
            except TaskRunError:
                _no_refusal(endpoint, ctx, "scoring")  # the refusal is the cause, not what it led to
                raise
            _no_refusal(endpoint, ctx, "scoring")
            return score
        finally:
            await asyncio.to_thread(sandbox.close)
