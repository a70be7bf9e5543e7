"""One Android emulator or device as an `Environment`, driven through adb.

`act` takes the JSON op list that `agent_s3.compile_android` produces (see `ops`), never
code. Phones have no pointer: `cursor_position` is where the last touch landed (the screen's
centre before any); screenshots are the device's own, unmarked, as an emulator's are, unless
`mark_touches` asks for the last touch to be drawn the way desktops draw the pointer. There is no
sandbox (no coding agent on Android). Revert loads an emulator VM snapshot through the
console; a physical device cannot revert and says so.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from core.images import decode_png, draw_marker, encode_png
from core.protocols import EnvError, Environment, EnvironmentLost, ExecResult, Sandbox, WorkerFacts
from core.trajectory import Task
from environments.tasks.handling import score_with, set_up_with

from .adb import AdbLink
from .apps import resolve_app
from .console import EmulatorConsole
from .ops import (
    Clear,
    Key,
    LongPress,
    Op,
    OpenApp,
    OpError,
    Swipe,
    Tap,
    Text,
    Unsupported,
    Wait,
    input_text_argvs,
    parse_ops,
    shell_line,
)
from .taskclient import AdbTaskClient

__all__ = ["AndroidEnvironment", "console_port_of", "physical_device_error", "uiautomator_xml"]

_PNG = b"\x89PNG\r\n\x1a\n"
_SIZE = re.compile(r"(Physical|Override) size:\s*(\d+)x(\d+)")


def console_port_of(serial: str) -> int | None:
    """The console port an emulator serial names (``emulator-5554`` → 5554), else None."""
    m = re.fullmatch(r"emulator-(\d+)", serial)
    return int(m.group(1)) if m else None


def physical_device_error(serial: str) -> EnvError:
    return EnvError(
        f"{serial} is a physical device: emulator snapshots are not available, so it cannot be "
        "reverted; run tasks on emulators (serials emulator-NNNN) or reset the device by hand"
    )


class AndroidEnvironment(Environment):
    """An emulator (revertible) or a physical device (not revertible) behind one adb server."""

    platform = "android"

    def __init__(
        self,
        link: AdbLink,
        *,
        name: str | None = None,
        console: EmulatorConsole | None = None,
        snapshot: str = "agent_s3_start",
        apps: dict[str, str] | None = None,
        settle: float = 0.5,
        mark_touches: bool = False,
    ) -> None:
        self.name = name or link.serial
        self.mark_touches = mark_touches
        self.link = link
        self.console = console
        self.snapshot = snapshot
        self.apps = dict(apps or {})
        self.settle = settle
        self._size: tuple[int, int] | None = None
        self._touch: tuple[int, int] | None = None
        self._closed = False

    @property
    def serial(self) -> str:
        return self.link.serial

    def _check(self) -> None:
        if self._closed:
            raise EnvironmentLost(f"environment {self.name} was closed")

    # -- screen -----------------------------------------------------------------------

    async def screen_size(self) -> tuple[int, int]:
        self._check()
        if self._size is None:
            result = await self.link.shell("wm size")
            sizes = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in _SIZE.finditer(result.stdout)}
            size = sizes.get("Override") or sizes.get("Physical")
            if size is None:
                raise EnvironmentLost(f"{self.name}: `wm size` gave no screen size: {result.stdout[:200]!r}")
            self._size = size
        return self._size

    async def _raw_screenshot(self) -> bytes:
        data = await self.link.exec_out("screencap -p")
        if not data.startswith(_PNG):
            raise EnvironmentLost(f"{self.name}: screencap returned no PNG (starts with {data[:16]!r})")
        return data

    async def screenshot(self) -> bytes:
        self._check()
        data = await self._raw_screenshot()
        if self._touch is None or not self.mark_touches:
            return data
        x, y = self._touch

        def mark() -> bytes:
            return encode_png(draw_marker(decode_png(data), x, y, "click", label="Touch"))

        return await asyncio.to_thread(mark)

    async def cursor_position(self) -> tuple[int, int]:
        self._check()
        if self._touch is not None:
            return self._touch
        w, h = await self.screen_size()
        return (w // 2, h // 2)

    # -- actions ----------------------------------------------------------------------

    async def act(self, code: str) -> ExecResult:
        """Run an op list; a malformed list or a failing op is an error result, not an exception."""
        self._check()
        try:
            ops = parse_ops(code)
        except OpError as exc:
            return ExecResult(status="error", returncode=2, stderr=str(exc))
        out: list[str] = []
        for index, op in enumerate(ops):
            try:
                result = await self._run(op)
            except OpError as exc:
                return ExecResult(
                    status="error", returncode=2, stdout="".join(out), stderr=f"op {index}: {exc}"
                )
            out.append(result.stdout)
            if not result.ok:
                return ExecResult(
                    status=result.status,
                    returncode=result.returncode,
                    stdout="".join(out),
                    stderr=f"op {index} ({op.op}) failed: {result.stderr.strip() or result.stdout.strip()}",
                )
        return ExecResult(status="ok", returncode=0, stdout="".join(out))

    async def _sh(self, *argvs: list[str]) -> ExecResult:
        result = ExecResult(status="ok", returncode=0)
        for argv in argvs:
            result = await self.link.shell(shell_line(argv))
            # `input` and `am` print errors yet may exit 0 on some Android versions.
            if result.ok and (result.stderr.startswith("Error") or result.stdout.startswith("Error")):
                return ExecResult(status="error", returncode=1, stdout=result.stdout, stderr=result.stderr)
            if not result.ok:
                return result
        return result

    async def _run(self, op: Op) -> ExecResult:
        match op:
            case Tap(x=x, y=y):
                self._touch = (x, y)
                return await self._sh(["input", "tap", str(x), str(y)])
            case LongPress(x=x, y=y, ms=ms):
                self._touch = (x, y)
                return await self._sh(["input", "swipe", str(x), str(y), str(x), str(y), str(ms)])
            case Swipe(x1=x1, y1=y1, x2=x2, y2=y2, ms=ms):
                self._touch = (x2, y2)
                return await self._sh(["input", "swipe", str(x1), str(y1), str(x2), str(y2), str(ms)])
            case Text(text=text):
                return await self._sh(*input_text_argvs(text))
            case Key():
                return await self._sh(["input", "keyevent", op.code()])
            case Clear(chars=chars):
                return await self._sh(
                    ["input", "keyevent", "KEYCODE_MOVE_END"], ["input", "keyevent", *["KEYCODE_DEL"] * chars]
                )
            case OpenApp(app=app):
                return await self._open(app)
            case Wait(seconds=seconds):
                await asyncio.sleep(seconds)
                return ExecResult(status="ok", returncode=0)
            case Unsupported(reason=reason):
                raise OpError(reason)
        raise OpError(f"unknown op {op!r}")

    async def _open(self, app: str) -> ExecResult:
        listed = await self.link.shell("pm list packages")
        if not listed.ok:
            return listed
        packages = [
            ln.removeprefix("package:").strip()
            for ln in listed.stdout.splitlines()
            if ln.startswith("package:")
        ]
        package = resolve_app(app, packages, self.apps)
        if package is None:
            raise OpError(f"no installed app matches {app!r}; open it from the home screen instead")
        return await self._sh(["monkey", "-p", package, "-c", "android.intent.category.LAUNCHER", "1"])

    # -- lifecycle --------------------------------------------------------------------

    def sandbox(self) -> Sandbox | None:
        return None

    async def save_snapshot(self, name: str | None = None) -> None:
        """Save the device's current state as an emulator snapshot (the start state by default)."""
        self._check()
        if self.console is None:
            raise physical_device_error(self.serial)
        await self.console.snapshot_save(name or self.snapshot)

    async def revert(self) -> None:
        await self.revert_to(self.snapshot)

    async def revert_to(self, snapshot: str) -> None:
        """Load the emulator snapshot `snapshot`; later reverts return to it."""
        self._check()
        if self.console is None:
            raise physical_device_error(self.serial)
        await self.console.snapshot_load(snapshot)
        self.snapshot = snapshot
        self._touch = None
        self._size = None
        if self.settle:
            await asyncio.sleep(self.settle)

    async def prepare_task(self, task: Task, cache_dir: Path) -> None:
        """Load the task's emulator snapshot (the pool's start one when it names none), then
        run its setup steps as adb shell commands."""
        await (self.revert() if task.snapshot in ("", "blank") else self.revert_to(task.snapshot))
        await set_up_with(AdbTaskClient(self), task, cache_dir)

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        return await score_with(AdbTaskClient(self), task, cache_dir, last_action=last_action)

    async def worker_facts(self) -> WorkerFacts:
        return WorkerFacts(code_agent=False)  # a phone runs no programs of the coding agent

    async def accessibility_tree(self) -> str | None:
        """The view hierarchy from `uiautomator dump`; EnvError when the device has none."""
        out = await self.link.exec_out("uiautomator dump /dev/tty", timeout=30.0)
        try:
            return uiautomator_xml(out.decode("utf-8", "replace"))
        except ValueError as e:
            raise EnvError(f"{self.name}: {e}") from None

    async def close(self) -> None:
        self._closed = True


def uiautomator_xml(output: str) -> str:
    """The hierarchy in `uiautomator dump /dev/tty` output (the device prints the XML, then
    "UI hierchary dumped to: /dev/tty"); ValueError with the device's words when absent."""
    start, end = output.find("<?xml"), output.rfind("</hierarchy>")
    if start < 0:
        start = output.find("<hierarchy")
    if start < 0 or end < start:
        raise ValueError(f"uiautomator gave no hierarchy: {output.strip()[:200]!r}")
    return output[start : end + len("</hierarchy>")]
