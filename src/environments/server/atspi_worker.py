"""The server's accessibility walker: one `atspi_tree.py serve` child, kept running.

Run with the system Python that has Debian's `python3-pyatspi` (the server's own interpreter
may lack the GObject bindings), as the desktop's user and on its D-Bus session. It answers
one request at a time; a request past its time limit kills the child and the next request
starts a fresh one, so a hung or crashing accessibility bus never blocks the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from environments.server.processes import ProcessRegistry, RunAs, kill_group

__all__ = ["ATSPI_PYTHON_ENV", "AtspiWorker", "NoAccessibility"]

_SCRIPT = Path(__file__).with_name("atspi_tree.py")
#: Which interpreter has the GObject AT-SPI bindings (Debian's python3-pyatspi).
ATSPI_PYTHON_ENV = "AGENT_S3_ATSPI_PYTHON"
#: Added to a request's limit when it has to start the child first.
_START_S = 20.0


def _atspi_python() -> str | None:
    chosen = os.environ.get(ATSPI_PYTHON_ENV)
    if chosen:
        return chosen
    return shutil.which("python3", path="/usr/bin:/bin") or None


class NoAccessibility(RuntimeError):
    """This desktop has no accessibility bus or bindings; the message says what to install."""


class AtspiWorker:
    """One `atspi_tree.py serve` child answering one request at a time."""

    def __init__(
        self, *, env: Mapping[str, str], run_as: RunAs | None = None, registry: ProcessRegistry | None = None
    ) -> None:
        self._env = dict(env)
        self._run_as = run_as
        self._registry = registry
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def ask(self, mode: str, *, timeout: float) -> dict[str, Any]:
        """The child's JSON reply to `mode`; RuntimeError when it hangs or dies (it is restarted)."""
        async with self._lock:
            if self._proc is None or self._proc.returncode is not None:
                timeout += _START_S
            proc = await self._ensure()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(mode.encode() + b"\n")
                await proc.stdin.drain()
                line = await asyncio.wait_for(proc.stdout.readline(), timeout)
            except TimeoutError:
                await self._stop()
                raise RuntimeError(f"the accessibility tree walk took over {timeout:g} s") from None
            except (ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
                await self._stop()
                raise RuntimeError(f"the accessibility walker died: {exc!r}") from exc
            if not line:
                await self._stop()
                raise RuntimeError("the accessibility walker exited")
            try:
                reply = json.loads(line)
            except ValueError as exc:
                raise RuntimeError(f"the accessibility walker printed no JSON: {line[:200]!r}") from exc
            if not isinstance(reply, dict):
                raise RuntimeError("the accessibility walker printed no JSON object")
            return reply

    async def _ensure(self) -> asyncio.subprocess.Process:
        if self._proc is not None and self._proc.returncode is None:
            return self._proc
        python = _atspi_python()
        if python is None:
            raise NoAccessibility("no system python3 for AT-SPI; install python3-pyatspi and at-spi2-core")
        argv = [python, "-I", str(_SCRIPT), "serve"]
        self._proc = await asyncio.create_subprocess_exec(
            *(self._run_as.wrap(argv) if self._run_as is not None else argv),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=self._env,
            start_new_session=True,
            limit=512 * 1024 * 1024,
        )
        if self._registry is not None:
            self._registry.add(self._proc.pid)
        return self._proc

    async def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        kill_group(proc.pid)
        if self._registry is not None:
            self._registry.discard(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()

    async def close(self) -> None:
        async with self._lock:
            await self._stop()


