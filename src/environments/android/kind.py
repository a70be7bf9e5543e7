"""The ``android`` kind: emulators (or devices) behind one adb server.

The pool connects to the first online devices (emulators first) and never starts or kills
one; a phone redraws faster than a desktop's applications start, so it settles in 1 s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal

from pydantic import Field

from ..kinds import EnvironmentKind, EnvironmentSettings, PoolRequest, register
from ..pool import EnvironmentPool
from .pool import AndroidPool
from .provider import AndroidProvider

__all__ = ["AndroidSettings"]


class AndroidSettings(EnvironmentSettings):
    """Android emulators or devices behind an adb server."""

    kind: Literal["android"] = "android"
    adb_host: str = "127.0.0.1"
    """Host of the adb server."""
    adb_port: int = Field(default=5037, ge=1, le=65535)
    """Port of the adb server."""
    serials: list[str] | None = None
    """Devices to use (``emulator-5554``, ...); None takes the first online ones, emulators first."""
    console_token: Path | None = None
    """The emulators' console auth token file; None is ~/.emulator_console_auth_token."""
    snapshot: str = "agent_s3_start"
    """Emulator snapshot a task without one of its own reverts to."""
    save_snapshot: bool = False
    """Save each emulator's current state as `snapshot` when the pool opens (else it must exist)."""

    def where(self) -> str:
        return f"Android devices of the adb server at {self.adb_host}:{self.adb_port}"


@asynccontextmanager
async def open_android_pool(cfg: AndroidSettings, request: PoolRequest) -> AsyncIterator[EnvironmentPool]:
    """Connect to `request.size` online devices of the adb server in `cfg` (emulators first)."""
    provider = AndroidProvider(
        request.size,
        serials=cfg.serials,
        adb_host=cfg.adb_host,
        adb_port=cfg.adb_port,
        token_path=cfg.console_token,
        snapshot=cfg.snapshot,
        save_snapshot=cfg.save_snapshot,
    )
    async with provider:
        yield AndroidPool(provider)


register(EnvironmentKind(
    name="android",
    settings=AndroidSettings,
    description="emulators or phones behind adb",
    open_pool=open_android_pool,
    platforms=("android",),
    settle_seconds=1.0,
))
