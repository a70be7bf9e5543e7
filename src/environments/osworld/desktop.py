"""`OSWorldDesktop`: an `Environment` over any server speaking OSWorld's protocol.

Used for local desktops (our server, with the warm `/action` executor) and for OSWorld VMs
(actions as ``python -c`` through `/execute`, exactly as OSWorld's controller sends them).
Reverting belongs to whoever owns the machine, so it is passed in as a callback.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from core.protocols import EnvError, Environment, ExecResult, Platform, Sandbox, WorkerFacts
from core.trajectory import Task
from environments.osworld.client import EndpointMissing, OSWorldClient
from environments.osworld.sandbox import ServerSandbox
from environments.tasks.handling import score_with, set_up_with
from environments.tasks.readiness import wait_ready

__all__ = ["PYAUTOGUI_PREFIX", "OSWorldDesktop"]

#: What OSWorld's controller puts before every pyautogui action.
PYAUTOGUI_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "


#: The account of OSWorld's Ubuntu image: ``user`` at /home/user, sudo with the image's
#: password ("password" on its VMware, VirtualBox and Docker images; the AWS image has its own).
OSWORLD_IMAGE_PASSWORD = "password"


def osworld_image_facts(platform: Platform, password: str = OSWORLD_IMAGE_PASSWORD) -> WorkerFacts:
    """What a worker on OSWorld's image is told; other platforms' images say nothing."""
    if platform != "ubuntu":
        return WorkerFacts()
    return WorkerFacts(user_name="user", home="/home/user", sudo="with_password", password=password)


class OSWorldDesktop(Environment):
    """A desktop driven over HTTP; `revert` and `on_close` come from the machine's owner."""

    def __init__(
        self,
        client: OSWorldClient,
        *,
        name: str,
        platform: Platform = "ubuntu",
        revert: Callable[[], Awaitable[None]] | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
        sandbox: Sandbox | None = None,
        with_sandbox: bool = True,
        action_timeout: float = 30.0,
        python: str = "python",
        facts: WorkerFacts | None = None,
    ) -> None:
        self.client = client
        self._facts = facts if facts is not None else osworld_image_facts(platform)
        self.name = name
        self.platform = platform
        self._revert = revert
        self._on_close = on_close
        self._sandbox = sandbox if sandbox is not None else (ServerSandbox(client) if with_sandbox else None)
        self.action_timeout = action_timeout
        self.python = python
        self._warm_action: bool | None = None
        self._size: tuple[int, int] | None = None
        self._closed = False

    async def screenshot(self) -> bytes:
        return await self.client.screenshot()

    async def screen_size(self) -> tuple[int, int]:
        if self._size is None:
            self._size = await self.client.screen_size()
        return self._size

    async def cursor_position(self) -> tuple[int, int]:
        return await self.client.cursor_position()

    async def act(self, code: str) -> ExecResult:
        """The warm executor when the server has one, else OSWorld's ``python -c``; never retried."""
        if self._warm_action is not False:
            try:
                result = await self.client.action(code, timeout=self.action_timeout)
            except EndpointMissing:
                self._warm_action = False
            else:
                self._warm_action = True
                return result
        command = [self.python, "-c", PYAUTOGUI_PREFIX + code]
        return await self.client.execute(command, timeout=self.action_timeout)

    def sandbox(self) -> Sandbox | None:
        return self._sandbox

    async def revert(self) -> None:
        if self._revert is None:
            raise EnvError(f"{self.name} cannot revert: its owner gave no revert callback")
        self._size = None
        await self._revert()

    async def prepare_task(self, task: Task, cache_dir: Path) -> None:
        """Revert when the owner gave a way to (a VM given by URL is reverted by whoever runs
        it), then run the setup steps through this desktop's own client."""
        if self._revert is not None:
            await self.revert()
        await set_up_with(self.client, task, cache_dir, password=self._facts.password)
        if task.config:  # OSWorld's harness sleeps 60 s here; this waits until the desktop is ready
            await wait_ready(self.client, task)

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        return await score_with(
            self.client, task, cache_dir, last_action=last_action, password=self._facts.password
        )

    async def accessibility_tree(self) -> str | None:
        return await self.client.accessibility_tree()

    async def start_recording(self) -> bool:
        """The server's ``/start_recording``; a server without it (an old image) cannot record."""
        try:
            await self.client.start_recording()
        except EndpointMissing:
            return False
        return True

    async def end_recording(self) -> bytes:
        return await self.client.end_recording()

    async def worker_facts(self) -> WorkerFacts:
        return self._facts

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._on_close is not None:
                await self._on_close()
        finally:
            await self.client.aclose()
