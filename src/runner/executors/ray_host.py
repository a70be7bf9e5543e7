"""One host's environments, held by a long-lived Ray actor placed on that host.

The actor opens the run's environment pool where it runs (local desktops started on this
host, or its share of a fleet) and serves each lent environment by name: screenshots,
actions, the coding sandbox, and the task's setup and scoring, which need the controller
endpoints that only this host reaches. It writes nothing of the run: files an evaluator
fetches into its cache are returned to the driver, which keeps them in the run folder.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError, Environment, ExecResult, Platform, SandboxLanguage, WorkerFacts
from core.trajectory import Task
from environments.kinds import EnvironmentSettings

from ..environments import EnvironmentPool, open_pool

__all__ = ["MAX_CACHE_BYTES", "EnvironmentHost", "Loan"]

#: Evaluator cache files larger than this in total are not shipped back to the driver.
MAX_CACHE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Loan:
    """An environment lent out by a host: its name there and what the worker must know."""

    name: str
    platform: Platform
    has_sandbox: bool


class EnvironmentHost:
    """Ray actor class (async): the environments of one host, lent by name."""

    def __init__(self) -> None:
        self._stack = AsyncExitStack()
        self._pool: EnvironmentPool | None = None
        self._lent: dict[str, Environment] = {}
        self._cache = Path(tempfile.mkdtemp(prefix="agent-s3-host-cache-"))

    async def start(self, cfg: EnvironmentSettings, size: int, hide: tuple[str, ...], run_id: str | None) -> str:
        """Open `size` environments here; returns this host's name."""
        pool = open_pool(cfg, size=size, hide=_existing(hide), run_id=run_id)
        self._pool = await self._stack.enter_async_context(pool)
        return socket.gethostname()

    async def close(self) -> None:
        """Stop every environment of this host; safe to call twice."""
        self._lent.clear()
        self._pool = None
        await self._stack.aclose()
        shutil.rmtree(self._cache, ignore_errors=True)

    def _env(self, name: str) -> Environment:
        env = self._lent.get(name)
        if env is None:
            raise EnvError(f"environment {name} is not lent out by this host")
        return env

    # -- lending ------------------------------------------------------------------------

    async def acquire(self) -> Loan:
        if self._pool is None:
            raise EnvError("this host's environments are not started")
        env = await self._pool.acquire()
        self._lent[env.name] = env
        return Loan(env.name, env.platform, env.sandbox() is not None)

    async def release(self, name: str) -> None:
        env = self._lent.pop(name, None)
        if env is not None and self._pool is not None:
            self._pool.release(env)

    # -- the environment ----------------------------------------------------------------

    async def screenshot(self, name: str) -> bytes:
        return await self._env(name).screenshot()

    async def screen_size(self, name: str) -> tuple[int, int]:
        return await self._env(name).screen_size()

    async def cursor_position(self, name: str) -> tuple[int, int]:
        return await self._env(name).cursor_position()

    async def act(self, name: str, code: str) -> ExecResult:
        return await self._env(name).act(code)

    async def revert(self, name: str) -> None:
        await self._env(name).revert()

    async def sandbox_run(self, name: str, language: SandboxLanguage, code: str, timeout: float) -> ExecResult:
        sandbox = self._env(name).sandbox()
        if sandbox is None:
            raise EnvError(f"environment {name} offers no sandbox")
        return await sandbox.run(language, code, timeout=timeout)

    # -- tasks --------------------------------------------------------------------------

    async def worker_facts(self, name: str) -> WorkerFacts:
        """What the environment says about itself to a worker (account, home, how apps open)."""
        return await self._env(name).worker_facts()

    async def accessibility_tree(self, name: str) -> str | None:
        """The environment's element tree (GUI-PRA's perception)."""
        return await self._env(name).accessibility_tree()

    async def start_recording(self, name: str) -> bool:
        """Start recording the environment's screen (``rollout.record``); False if it cannot."""
        return await self._env(name).start_recording()

    async def end_recording(self, name: str) -> bytes:
        """Stop the recording and send the mp4 back to the driver."""
        return await self._env(name).end_recording()

    async def prepare(self, name: str, task: Task, key: str) -> dict[str, bytes]:
        """Revert and set the task up; returns the files the setup left in its cache."""
        cache = self._fresh_cache(name, key)
        await self._env(name).prepare_task(task, cache)
        return _files(cache)

    async def score(self, name: str, task: Task, key: str, last_action: str | None) -> tuple[float | None, dict[str, bytes]]:
        """The evaluator's score, and the files it fetched into its cache."""
        cache = self._cache / name / key
        cache.mkdir(parents=True, exist_ok=True)
        score = await self._env(name).score_task(task, cache, last_action=last_action)
        return score, _files(cache)

    def _fresh_cache(self, name: str, key: str) -> Path:
        cache = self._cache / name / key
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        return cache


def _existing(paths: tuple[str, ...]) -> tuple[str, ...]:
    """The driver's folders that exist on this host too (a shared filesystem)."""
    return tuple(p for p in paths if Path(p).exists())


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root` by relative path (nothing when they exceed the cap)."""
    found = [p for p in sorted(root.rglob("*")) if p.is_file()]
    if sum(p.stat().st_size for p in found) > MAX_CACHE_BYTES:
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in found}
