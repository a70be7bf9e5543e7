"""Environments for a run: a pool to borrow from, and a task's setup and scoring on one.

``local`` starts desktops on this machine (stopped when the pool closes, on Ctrl-C too);
``osworld`` drives one running server that speaks OSWorld's protocol; ``aws`` launches
OSWorld images on EC2; ``android`` borrows emulators behind an adb server (see
`runner.android`). How a task is reverted to, set up and scored is each environment's own
business (`Environment.prepare_task` / `score_task`): nothing here asks which kind it has.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol, cast

from pydantic import ValidationError

from aws import FleetConfig
from core.protocols import EnvError, Environment, Platform
from environments.local import DesktopConfig, LocalEnvironment, LocalProvider
from environments.osworld import OSWorldClient, OSWorldDesktop
from environments.osworld.aws import AWSProvider

from .android import open_android_pool
from .capacity import machine_room, plan_desktops, plan_spares
from .config import EnvironmentConfig

__all__ = ["EnvironmentPool", "FixedPool", "open_pool"]

_PLATFORMS: dict[str, Platform] = {"linux": "ubuntu", "windows": "windows", "android": "android"}


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


class _LocalPool:
    """The local provider seen as a pool of plain environments."""

    def __init__(self, provider: LocalProvider) -> None:
        self.provider = provider

    async def acquire(self) -> Environment:
        return await self.provider.acquire()

    def release(self, env: Environment) -> None:
        self.provider.release(cast(LocalEnvironment, env))  # it lends only its own


@asynccontextmanager
async def open_pool(cfg: EnvironmentConfig, *, size: int = 1, hide: tuple[str, ...] = (),
                    run_id: str | None = None) -> AsyncIterator[EnvironmentPool]:
    """Start (or connect to) the environments of a run and close them afterwards.

    Local desktops are capped to what this machine has room for (`runner.capacity`); the
    rollouts beyond that wait for a desktop. `hide` lists host folders the coding agent's
    sandbox must not see (the run folder; a local desktop sees no host folder at all, its
    mount namespace is an allowlist); `run_id` tags the EC2 instances of ``kind: aws``
    (found again by ``agent-s3 aws reap``).
    """
    if cfg.kind == "local":
        room = await asyncio.to_thread(machine_room)
        size = plan_desktops(size, cfg, room)  # queue rollouts past what fits
        desktop = DesktopConfig(width=cfg.width, height=cfg.height, sandbox=cfg.sandbox,
                                network=cfg.network, spare=plan_spares(size, cfg, room))
        async with LocalProvider(size, base_dir=cfg.base_dir, config=desktop) as provider:
            yield _LocalPool(provider)
        return
    if cfg.kind == "android":
        async with open_android_pool(cfg, size) as pool:
            yield pool
        return
    if cfg.kind == "aws":
        token = cfg.token.get_secret_value() if cfg.token else None  # the images' servers may want one
        async with AWSProvider(size, config=_fleet_config(cfg), run_id=run_id, token=token, with_sandbox=cfg.sandbox,
                               action_timeout=cfg.action_timeout) as aws:
            yield cast(EnvironmentPool, aws)  # lends and takes back only its own AWSDesktops
        return
    if not cfg.url:
        raise EnvError("environment.kind osworld needs a server URL: pass --url http://HOST:PORT")
    token = cfg.token.get_secret_value() if cfg.token else None
    client = OSWorldClient(cfg.url, token=token)
    try:
        await client.wait_ready(timeout=30.0)
        platform = _PLATFORMS.get((await client.platform()).strip().lower(), "ubuntu")
        env = OSWorldDesktop(
            client,
            name="osworld",
            platform=platform,
            with_sandbox=cfg.sandbox,
            action_timeout=cfg.action_timeout,
        )
        yield FixedPool(env)
    finally:
        await client.aclose()


def _fleet_config(cfg: EnvironmentConfig) -> FleetConfig:
    try:
        return FleetConfig.model_validate(cfg.fleet)
    except ValidationError as e:
        raise EnvError(f"environment.fleet is not a valid fleet configuration: {e.errors()[0]['msg']}") from None
