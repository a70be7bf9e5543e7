"""The lending mechanics shared by the environment providers (local, AWS, Android, QEMU).

`EnvironmentPool` is what a run borrows from (every kind's pool opener yields one);
`FixedPool` lends a given set of environments as they are.

A provider starts its environments, lends them out through an idle queue (`acquire` /
`release`) and closes them all on exit (``async with``, or `close`, safe to call twice).
`LendingPool` lends a fixed set: what to start is the provider's `_start_all`, and a device
that goes bad is the caller's to notice (nothing is replaced). `ReplacingPool` adds what
desktops the pool itself owns need: they start in parallel, the ones that did start are
closed when any fails, and a loan that finds one unhealthy gets a fresh one instead.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

from core.protocols import EnvError, Environment

__all__ = ["EnvironmentPool", "FixedPool", "LendingPool", "ReplacingPool"]

E = TypeVar("E", bound=Environment)


class EnvironmentPool(Protocol):
    """Where strategies borrow environments from."""

    async def acquire(self) -> Environment: ...

    def release(self, env: Environment) -> None: ...


class FixedPool:
    """Lends out a fixed set of environments (a given VM, or desktops a test started)."""

    def __init__(self, *envs: Environment) -> None:
        self._idle: asyncio.Queue[Environment] = asyncio.Queue()
        for env in envs:
            self._idle.put_nowait(env)

    async def acquire(self) -> Environment:
        return await self._idle.get()

    def release(self, env: Environment) -> None:
        self._idle.put_nowait(env)


class LendingPool(ABC, Generic[E]):
    """``size`` environments lent out one loan at a time; a subclass says how they start."""

    def __init__(self, size: int, *, too_small: str, not_started: str) -> None:
        """`too_small` and `not_started` are the one-line errors for ``size < 1`` and for a
        loan before `start`."""
        if size < 1:
            raise EnvError(too_small)
        self.size = size
        self._not_started = not_started
        self._envs: dict[str, E] = {}
        self._idle: asyncio.Queue[E] | None = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @abstractmethod
    async def _start_all(self) -> list[E]:
        """Start the pool's environments and register them in ``_envs``; raise if any fails."""

    async def start(self) -> None:
        """Start every environment and make it available to `acquire`."""
        envs = await self._start_all()
        self._idle = asyncio.Queue()
        for env in envs:
            self._idle.put_nowait(env)

    @property
    def environments(self) -> list[E]:
        """Every environment of the pool, lent out or not."""
        return list(self._envs.values())

    async def _checked(self, env: E) -> E:
        """What a loan of `env` hands out; a fixed pool lends it as it is."""
        return env

    async def acquire(self) -> E:
        """An idle environment (waits while all are lent out)."""
        if self._idle is None:
            raise EnvError(self._not_started)
        while True:
            env = await self._idle.get()
            if env.name in self._envs:
                return await self._checked(env)

    def release(self, env: E) -> None:
        """Give an environment back for the next `acquire`."""
        if self._idle is not None and env.name in self._envs:
            self._idle.put_nowait(env)

    async def _forget(self, env: E) -> None:
        """Drop `env` from the pool (environments that report their own closing call this)."""
        self._envs.pop(env.name, None)

    async def close(self) -> None:
        """Close every environment of the pool; safe to call twice."""
        envs = list(self._envs.values())
        self._envs.clear()
        await asyncio.gather(*(e.close() for e in envs), return_exceptions=True)


class ReplacingPool(LendingPool[E]):
    """A pool that starts its own environments, so it can start another for a dead one."""

    @abstractmethod
    async def _open(self) -> E:
        """Start one new environment under a name not used before; leave nothing behind on failure."""

    @abstractmethod
    async def _healthy(self, env: E) -> bool:
        """Whether `env` can be lent out as it is."""

    async def _start_one(self) -> E:
        env = await self._open()
        self._envs[env.name] = env
        return env

    async def _start_all(self) -> list[E]:
        """Start ``size`` environments in parallel; on any failure close the ones that did start."""
        results = await asyncio.gather(*(self._start_one() for _ in range(self.size)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.close()
            raise errors[0]
        return [r for r in results if not isinstance(r, BaseException)]

    async def _checked(self, env: E) -> E:
        return env if await self._healthy(env) else await self.replace(env)

    async def replace(self, env: E) -> E:
        """Close `env` (dead or alive) and start a fresh one under a new name."""
        await env.close()
        return await self._start_one()
