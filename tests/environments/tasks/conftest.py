"""Fixtures for task tests: a desktop-less client that runs real commands in a private home.

`ShellClient` implements the `TaskClient` endpoints with real subprocesses and real files in
a temporary home (``~`` expands to it), and records the window calls it cannot perform
without a display. Desktop tests use the real server client instead.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from core.trajectory import Task
from environments.tasks import parse_task
from environments.tasks.context import TaskContext


class ShellClient:
    """Runs `execute` as real processes with HOME set to `home`; records launches and windows."""

    def __init__(self, home: Path, screen: tuple[int, int] = (1920, 1080)) -> None:
        self.home = home
        self.screen = screen
        self.calls: list[tuple[str, Any]] = []

    def _expand(self, path: str) -> Path:
        if path == "~" or path.startswith("~/"):
            return self.home / path[2:]
        return Path(path)

    async def execute(self, command: str | list[str], *, shell: bool = False) -> dict[str, Any]:
        self.calls.append(("execute", command))
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        if isinstance(command, list):
            command = [str(self._expand(c)) if c.startswith("~/") else c for c in command]
            if shell:
                command = shlex.join(command)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home)}
        try:
            proc = await asyncio.to_thread(
                subprocess.run,
                command,
                shell=shell,
                cwd=self.home,
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            # What OSWorld's server answers (HTTP 500) when a command cannot run to an exit.
            return {"status": "error", "message": str(exc)}
        return {
            "status": "success",
            "output": proc.stdout,
            "error": proc.stderr,
            "returncode": proc.returncode,
        }

    async def launch(self, command: str | list[str], *, shell: bool = False) -> str:
        self.calls.append(("launch", command))
        return "launched"

    async def open_file(self, path: str) -> str:
        self.calls.append(("open", path))
        if not self._expand(path).exists():
            raise FileNotFoundError(path)
        return "opened"

    async def upload(self, path: str, data: bytes) -> str:
        self.calls.append(("upload", path))
        target = self._expand(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return f"File Uploaded: {len(data)} bytes"

    async def file(self, path: str) -> bytes | None:
        self.calls.append(("file", path))
        target = self._expand(path)
        return target.read_bytes() if target.is_file() else None

    async def activate_window(self, window_name: str, *, strict: bool = False, by_class: bool = False) -> str:
        self.calls.append(("activate_window", (window_name, strict, by_class)))
        return "ok"

    async def close_window(self, window_name: str, *, strict: bool = False, by_class: bool = False) -> str:
        self.calls.append(("close_window", (window_name, strict, by_class)))
        return "ok"

    async def screen_size(self) -> tuple[int, int]:
        self.calls.append(("screen_size", None))
        return self.screen


@pytest.fixture
def shell_client(tmp_path: Path) -> ShellClient:
    home = tmp_path / "home"
    home.mkdir()
    return ShellClient(home)


@pytest.fixture
def make_ctx(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Build a TaskContext for a task dict (its file lives in tmp_path/tasks, cache in tmp_path/cache)."""

    def build(data: dict[str, Any]) -> TaskContext:
        task_dir = tmp_path / "tasks"
        task_dir.mkdir(exist_ok=True)
        full = {"id": "t-1", "instruction": "do it", "evaluator": {"func": "exact_match"}} | data
        task: Task = parse_task(full, "test.json", path=task_dir / f"{full['id']}.json")
        return TaskContext(task=task, cache_dir=tmp_path / "cache" / task.id)

    return build
