"""The `Environment` a rollout gets from the local pool.

Screens, actions and the sandbox go through the desktop's controller server (an inner
OSWorld-protocol environment); revert is done locally on the desktop. Before and after every
call the desktop's health is checked, so a dead display or server surfaces as
`EnvironmentLost` (retry the rollout elsewhere) rather than as a failed action.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from core.protocols import (
    EnvError,
    Environment,
    EnvironmentLost,
    ExecResult,
    Sandbox,
    SandboxLanguage,
    WorkerFacts,
)
from core.trajectory import Task
from environments.tasks.readiness import Readiness

from .desktop import DesktopInfo, LocalDesktop
from .snapshot import SnapshotSpec
from .spawner import run_blocking
from .tasking import DesktopTasks

__all__ = ["LocalEnvironment"]

T = TypeVar("T")
#: How often a running call checks that its desktop is still alive.
_WATCH_S = 0.1
_LOSS_GRACE_POLLS = 10


class LocalEnvironment(Environment):
    """One pooled local desktop seen through its server; ``close`` stops the desktop."""

    platform = "ubuntu"

    def __init__(
        self,
        desktop: LocalDesktop,
        inner: Environment,
        *,
        on_close: Callable[[LocalEnvironment], Awaitable[None]],
    ) -> None:
        self.name = desktop.name
        self.desktop = desktop
        self._inner = inner
        self._on_close = on_close
        self._closed = False
        #: The task part of `Environment`: setup, scoring, facts.
        self.tasks = DesktopTasks(desktop, self.revert_to)

    @property
    def last_readiness(self) -> Readiness | None:
        """How the last task's wait for a ready desktop ended (None before any task with setup)."""
        return self.tasks.last_readiness

    @property
    def last_setup_warnings(self) -> list[str]:
        """The last task's setup commands that ran but exited non-zero (one line each)."""
        return self.tasks.last_setup_warnings

    @property
    def info(self) -> DesktopInfo:
        return self.desktop.info()

    def _check(self) -> None:
        if self._closed:
            raise EnvironmentLost(f"environment {self.name} was closed")
        problem = self.desktop.problem()
        if problem is not None:
            raise EnvironmentLost(f"desktop {self.name} is gone: {problem}")

    async def _guard(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` while watching the desktop: if its sandbox dies meanwhile, the call is
        cancelled at once (the host keeps the listening socket across reverts, so a dead
        server would otherwise look like a slow one until the client's timeout)."""
        self._check()
        task = asyncio.ensure_future(call())
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=_WATCH_S)
                problem = None if task.done() else self.desktop.problem()
                if problem is not None:
                    task.cancel()
                    raise EnvironmentLost(f"desktop {self.name} is gone: {problem}")
            return task.result()
        except EnvironmentLost:
            raise
        except (TimeoutError, EnvError, OSError) as exc:
            # A part that died (say the X server) fails the call a moment before the session
            # notices and ends the sandbox: give it that moment before calling it an error.
            for _ in range(_LOSS_GRACE_POLLS):
                problem = self.desktop.problem()
                if problem is not None:
                    raise EnvironmentLost(f"desktop {self.name} is gone: {problem}") from exc
                await asyncio.sleep(_WATCH_S)
            raise
        finally:
            if not task.done():
                task.cancel()

    async def screenshot(self) -> bytes:
        return await self._guard(self._inner.screenshot)

    async def screen_size(self) -> tuple[int, int]:
        return await self._guard(self._inner.screen_size)

    async def cursor_position(self) -> tuple[int, int]:
        return await self._guard(self._inner.cursor_position)

    async def act(self, code: str) -> ExecResult:
        return await self._guard(lambda: self._inner.act(code))

    def sandbox(self) -> Sandbox | None:
        inner = self._inner.sandbox()
        return None if inner is None else _GuardedSandbox(self, inner)

    async def revert(self) -> None:
        self._check()
        await self._inner.revert()

    async def revert_to(self, snapshot: str | SnapshotSpec, *, needs_network: bool | None = None) -> None:
        """Revert to another snapshot (e.g. the one a task names); later reverts return to it.
        ``needs_network``: whether the next task needs the internet (None keeps the setting)."""
        self._check()
        await run_blocking(lambda: self.desktop.revert(snapshot, needs_network=needs_network))

    async def prepare_task(self, task: Task, cache_dir: Path) -> None:
        await self.tasks.prepare(task, cache_dir)

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        return await self.tasks.score(task, cache_dir, last_action=last_action)

    async def start_recording(self) -> bool:
        return await self._guard(self._inner.start_recording)

    async def end_recording(self) -> bytes:
        return await self._guard(self._inner.end_recording)

    async def worker_facts(self) -> WorkerFacts:
        return self.tasks.facts()

    async def accessibility_tree(self) -> str | None:
        return await self.tasks.accessibility_tree()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.tasks.close_proxy()
        try:
            await self._inner.close()
        finally:
            await self._on_close(self)


class _GuardedSandbox:
    """The server's sandbox, with a dead desktop reported as `EnvironmentLost`."""

    def __init__(self, env: LocalEnvironment, inner: Sandbox) -> None:
        self._env = env
        self._inner = inner

    async def run(self, language: SandboxLanguage, code: str, *, timeout: float = 60.0) -> ExecResult:
        return await self._env._guard(lambda: self._inner.run(language, code, timeout=timeout))
