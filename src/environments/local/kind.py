"""The ``local`` kind: virtual desktops started on this machine (the default).

Desktops are capped to what this machine has room for (`environments.capacity`); rollouts
beyond that wait for a desktop. Whether each desktop keeps a spare sandbox for fast
reverts is decided here too, from the same room.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal, cast

from pydantic import Field

from core.protocols import Environment

from ..capacity import MachineRoom, machine_room, plan_fleet
from ..kinds import EnvironmentKind, EnvironmentSettings, PoolRequest, register
from ..pool import EnvironmentPool
from .desktop import DesktopConfig, LocalDesktop
from .environment import LocalEnvironment
from .provider import LocalProvider
from .server_env import server_environment

__all__ = ["LocalPool", "LocalSettings", "plan_desktops", "plan_spares"]

_log = logging.getLogger("environments.local")


class LocalSettings(EnvironmentSettings):
    """Virtual desktops on this machine: Xvfb, real applications and the controller server
    in one confined sandbox each."""

    kind: Literal["local"] = "local"
    width: int = Field(default=1920, ge=320)
    """Screen width of a local desktop."""
    height: int = Field(default=1080, ge=240)
    """Screen height of a local desktop."""
    base_dir: Path | None = None
    """Where local desktops keep their state; None is $AGENT_S3_ENV_DIR or /tmp/agent-s3/envs."""
    action_timeout: float = Field(default=30.0, gt=0)
    """Seconds one GUI action may run."""
    desktop_memory_mib: int = Field(default=512, ge=32)
    """Memory budgeted per local desktop (screen, window manager, server, an app): no more
    desktops start at once than the machine's available memory allows (see environments.capacity)."""
    desktops_per_core: float = Field(default=4.0, gt=0)
    """Local desktops run at once per core, at most (8 on 2 cores keep their latency goals)."""
    spare: bool | None = None
    """Keep a spare sandbox started beside each local desktop, so revert only swaps it in
    (0.04 s instead of about 1 s on a 2-core machine; benchmarks/revert.py) at the cost of
    one more desktop's memory budget (a spare measures about 140 MiB PSS): None is on
    when the machine has room for it (else off, said in one line); true counts it in the
    capacity check even if fewer desktops fit; false never starts one."""
    network: Literal["off", "task", "on"] = "task"
    """Internet: ``task`` gives it only to a task that needs it (a browser task, a remote URL
    in its setup, ``requires_network: true``; see `environments.tasks.network`), ``off`` to
    none, ``on`` to every task. It is a user-mode NAT that never reaches this machine's own
    addresses; without it a desktop has loopback only."""


def plan_desktops(requested: int, cfg: LocalSettings, room: MachineRoom | None = None) -> int:
    """How many of `requested` local desktops to start: all when they fit, else as many as
    fit (the rollouts queue for them). `CapacityError` when not even one fits."""
    memory = cfg.desktop_memory_mib * (2 if cfg.spare is True else 1)  # a spare asked for is budgeted too
    return plan_fleet(requested, room or machine_room(), memory_mib=memory, per_core=cfg.desktops_per_core)


def plan_spares(desktops: int, cfg: LocalSettings, room: MachineRoom | None = None) -> bool:
    """Whether each of `desktops` local desktops keeps a spare sandbox for fast reverts.

    A spare is a whole second desktop at rest, so it is budgeted a desktop's memory (it uses
    no core while it waits). ``spare: None`` turns them on only when they fit beside the
    desktops, and says so in one line when they do not.
    """
    if cfg.spare is not None:
        return cfg.spare
    room = room or machine_room()
    needed = 2 * desktops * cfg.desktop_memory_mib
    if room.memory_mib >= needed:
        return True
    _log.warning(
        "no room for spare desktops (%d MiB available, %d MiB needed for %d desktops and their spares): "
        "reverts start a new sandbox (about 1 s each, more under load); set environment.spare: true to keep "
        "spares on fewer desktops",
        room.memory_mib, needed, desktops,
    )
    return False


class LocalPool:
    """The local provider seen as a pool of plain environments (its `provider` holds the desktops)."""

    def __init__(self, provider: LocalProvider) -> None:
        self.provider = provider

    async def acquire(self) -> Environment:
        return await self.provider.acquire()

    def release(self, env: Environment) -> None:
        self.provider.release(cast(LocalEnvironment, env))  # it lends only its own


@asynccontextmanager
async def open_local_pool(cfg: LocalSettings, request: PoolRequest) -> AsyncIterator[EnvironmentPool]:
    """Start the desktops that fit (stopped when the pool closes, on Ctrl-C too)."""
    room = await asyncio.to_thread(machine_room)
    size = plan_desktops(request.size, cfg, room)  # queue rollouts past what fits
    desktop = DesktopConfig(width=cfg.width, height=cfg.height, sandbox=cfg.sandbox,
                            network=cfg.network, spare=plan_spares(size, cfg, room))

    def factory(started: LocalDesktop) -> Environment:
        return server_environment(started, action_timeout=cfg.action_timeout)

    async with LocalProvider(size, base_dir=cfg.base_dir, config=desktop, factory=factory) as provider:
        yield LocalPool(provider)


register(EnvironmentKind(
    name="local",
    settings=LocalSettings,
    description="a desktop on this machine",
    open_pool=open_local_pool,
    platforms=("ubuntu",),
))
