"""A `Task`'s setup and scoring through any task client: what environments call from
their `prepare_task` / `score_task`, so each provider only says how it reverts and which
client reaches its desktop. Both run OSWorld's own code at a door to that client
(`environments.tasks.door`)."""

from __future__ import annotations

from pathlib import Path

from core.trajectory import Task
from environments.tasks.client import TaskClient
from environments.tasks.context import TaskContext
from environments.tasks.door import Endpoint
from environments.tasks.evaluate import evaluate, run_setup

__all__ = ["needs_client", "score_with", "set_up_with"]


def needs_client(task: Task) -> bool:
    """Whether preparing `task` involves its setup steps or a check of its evaluator."""
    return bool(task.config or task.evaluator)


def _context(task: Task, cache_dir: Path, password: str | None, use_proxy: bool = False) -> TaskContext:
    ctx = TaskContext(task=task, cache_dir=cache_dir, use_proxy=use_proxy)
    if password is not None:
        ctx.client_password = password  # fills OSWorld's {CLIENT_PASSWORD} placeholders
    return ctx


async def set_up_with(
    client: TaskClient | Endpoint, task: Task, cache_dir: Path, *, password: str | None = None,
    use_proxy: bool = False,
) -> list[str]:
    """Run `task`'s setup steps through `client` (after checking its evaluator can run);
    `use_proxy` when OSWorld's proxy was set up for it (`environments.osworld.proxy`). Returns
    a warning line for each setup command that ran but exited non-zero."""
    if needs_client(task):
        return await run_setup(client, _context(task, cache_dir, password, use_proxy))
    return []


async def score_with(
    client: TaskClient | Endpoint,
    task: Task,
    cache_dir: Path,
    *,
    last_action: str | None,
    password: str | None = None,
    use_proxy: bool = False,
) -> float | None:
    """`task`'s evaluator through `client`; None without one. `last_action` ``"fail"`` is OSWorld's FAIL."""
    if not task.evaluator:
        return None
    ctx = _context(task, cache_dir, password, use_proxy)
    return await evaluate(client, ctx, last_action="FAIL" if last_action == "fail" else None)
