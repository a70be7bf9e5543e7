"""A pool of Android emulators (or devices) behind one adb server, lent out for rollouts.

Several emulators on one host share the adb server (port 5037) and differ by console port
(5554, 5556, …), which their serials name (``emulator-5554``). The pool picks the first
`size` online devices (emulators first, in port order) unless serials are given, saves or
checks the start snapshot, and hands them out with `acquire` / `release`, the same shape as
`environments.local.LocalProvider`. It never starts or kills emulators: they belong to
whoever launched them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from core.protocols import EnvError

from ..pool import LendingPool
from .adb import AdbLink, list_devices
from .console import EmulatorConsole
from .environment import AndroidEnvironment, console_port_of

__all__ = ["AndroidProvider"]


class AndroidProvider(LendingPool[AndroidEnvironment]):
    """``async with AndroidProvider(3) as pool: env = await pool.acquire()``.

    A fixed pool: a device that goes offline is not replaced (see `environments.android.pool`),
    and closing forgets the devices (the emulators keep running).
    """

    def __init__(
        self,
        size: int = 1,
        *,
        serials: Sequence[str] | None = None,
        adb_host: str = "127.0.0.1",
        adb_port: int = 5037,
        console_host: str = "127.0.0.1",
        token_path: Path | None = None,
        snapshot: str = "agent_s3_start",
        save_snapshot: bool = False,
        apps: dict[str, str] | None = None,
        settle: float = 0.5,
    ) -> None:
        super().__init__(
            size,
            too_small="an Android pool needs at least one device; pass size >= 1",
            not_started="the Android pool is not started; use `async with AndroidProvider(...)`",
        )
        self.serials = list(serials) if serials else None
        self.adb_host = adb_host
        self.adb_port = adb_port
        self.console_host = console_host
        self.token_path = token_path
        self.snapshot = snapshot
        self.save_snapshot = save_snapshot
        self.apps = apps
        self.settle = settle

    async def _choose(self) -> list[str]:
        known = dict(await asyncio.to_thread(list_devices, self.adb_host, self.adb_port))
        if self.serials:
            missing = [s for s in self.serials if known.get(s) != "device"]
            if missing:
                raise EnvError(
                    f"adb at {self.adb_host}:{self.adb_port} has no online device {', '.join(missing)}; "
                    "check `adb devices`"
                )
            return self.serials[: self.size]
        online = [s for s, state in known.items() if state == "device"]
        online.sort(key=lambda s: (console_port_of(s) is None, console_port_of(s) or 0, s))
        if len(online) < self.size:
            raise EnvError(
                f"{self.size} Android devices wanted but adb at {self.adb_host}:{self.adb_port} has "
                f"{len(online)} online; start more emulators (e.g. `emulator -avd NAME -port 5556`)"
            )
        return online[: self.size]

    def _make(self, serial: str) -> AndroidEnvironment:
        port = console_port_of(serial)
        console = (
            EmulatorConsole(port, host=self.console_host, token_path=self.token_path)
            if port is not None
            else None
        )
        return AndroidEnvironment(
            AdbLink(serial, host=self.adb_host, port=self.adb_port),
            name=f"android-{serial}",
            console=console,
            snapshot=self.snapshot,
            apps=self.apps,
            settle=self.settle,
        )

    async def _start_all(self) -> list[AndroidEnvironment]:
        """Connect to the chosen devices; save (or load, to check it exists) the start snapshot."""
        envs = [self._make(s) for s in await self._choose()]
        emulators = [e for e in envs if e.console is not None]
        if self.save_snapshot:
            await asyncio.gather(*(e.save_snapshot() for e in emulators))
        else:
            await asyncio.gather(*(e.revert() for e in emulators))
        for env in envs:
            self._envs[env.name] = env
        return envs
