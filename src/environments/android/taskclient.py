"""The task endpoints (`environments.tasks.TaskClient`) over adb, so the desktop suite's
setup steps, getters and metrics score Android tasks unchanged.

`execute` runs a device shell command (a task's check, e.g. ``settings get global
wifi_on``); `launch` and `activate_window` start an app by name or package; `close_window`
force-stops one; `file` and `upload` move bytes with ``exec:cat``. Task files are trusted
input written by the benchmark's authors; list commands are quoted argument by argument.

The client asks only for a `Device` (an adb link, the apps table, the screen's size), which
`AndroidEnvironment` is: it knows nothing of the environment class that uses it.
"""

from __future__ import annotations

import shlex
from typing import Protocol

from core.protocols import ExecResult

from .adb import AdbLink
from .apps import resolve_app
from .ops import shell_line

__all__ = ["AdbTaskClient", "Device"]


class Device(Protocol):
    """What the task endpoints need of a phone (an `AndroidEnvironment` is one)."""

    link: AdbLink
    apps: dict[str, str]

    async def screen_size(self) -> tuple[int, int]: ...


class AdbTaskClient:
    """Setup steps and evaluator getters of one Android environment."""

    def __init__(self, env: Device) -> None:
        self.env = env

    def _line(self, command: str | list[str]) -> str:
        return shell_line(command) if isinstance(command, list) else command

    async def execute(self, command: str | list[str], *, shell: bool = False) -> ExecResult:
        return await self.env.link.shell(self._line(command))

    async def launch(self, command: str | list[str], *, shell: bool = False) -> ExecResult:
        argv = command if isinstance(command, list) else shlex.split(command)
        if len(argv) == 1:
            return await self.activate_window(argv[0])
        return await self.execute(argv)

    async def open_file(self, path: str) -> ExecResult:
        return await self.execute(["am", "start", "-a", "android.intent.action.VIEW", "-d", f"file://{path}"])

    async def upload(self, path: str, data: bytes) -> ExecResult:
        await self.env.link.exec_out(f"sh -c {shlex.quote('cat > ' + shlex.quote(path))}", stdin=data)
        return ExecResult(status="ok", returncode=0)

    async def file(self, path: str) -> bytes | None:
        exists = await self.execute(["test", "-e", path])
        if not exists.ok:
            return None
        return await self.env.link.exec_out(shell_line(["cat", path]))

    async def _package(self, name: str) -> str:
        listed = await self.env.link.shell("pm list packages")
        packages = [ln.removeprefix("package:").strip() for ln in listed.stdout.splitlines()]
        return resolve_app(name, packages, self.env.apps) or name

    async def activate_window(
        self, window_name: str, *, strict: bool = False, by_class: bool = False
    ) -> ExecResult:
        package = await self._package(window_name)
        return await self.execute(["monkey", "-p", package, "-c", "android.intent.category.LAUNCHER", "1"])

    async def close_window(
        self, window_name: str, *, strict: bool = False, by_class: bool = False
    ) -> ExecResult:
        return await self.execute(["am", "force-stop", await self._package(window_name)])

    async def screen_size(self) -> tuple[int, int]:
        return await self.env.screen_size()
