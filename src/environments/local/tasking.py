"""A local desktop's task handling: revert to the task's snapshot, set up and score the task
through the desktop's controller server, and the facts a worker on it needs.

`DesktopTasks` is given the desktop and how to revert it, and keeps what the last setup
left (its warnings, how the wait for readiness ended, OSWorld's proxy relay while one runs);
`LocalEnvironment` holds one and answers the task part of `Environment` through it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from core.protocols import EnvError, WorkerFacts
from core.trajectory import Task
from environments.osworld.client import OSWorldClient
from environments.osworld.proxy import wants_proxy
from environments.tasks.handling import needs_client, score_with, set_up_with
from environments.tasks.network import needs_network
from environments.tasks.readiness import Readiness, wait_ready

from .desktop import LocalDesktop
from .local_proxy import start_local_proxy
from .proxy_relay import ProxyRelay
from .server_env import desktop_client
from .snapshot import SNAPSHOTS

__all__ = ["LEADERBOARD_NOTE", "DesktopTasks", "Revert"]

#: A local desktop runs Debian's builds of OSWorld's apps and Chromium where tasks name Chrome
#: (`environments.server.app_names`), so its scores are not the leaderboard's.
LEADERBOARD_NOTE = "not leaderboard-comparable (Debian app versions, Chromium for Chrome)"

#: Reverts the desktop to a snapshot, with the internet or not (`LocalEnvironment.revert_to`).
Revert = Callable[..., Awaitable[None]]


class DesktopTasks:
    """Setup, scoring and facts of one local desktop's tasks."""

    def __init__(self, desktop: LocalDesktop, revert_to: Revert) -> None:
        self.desktop = desktop
        self._revert_to = revert_to
        #: OSWorld's proxy relay of the current task, if it asked for one (closed at revert).
        self.relay: ProxyRelay | None = None
        #: How the last task's wait for a ready desktop ended (None before any task with setup).
        self.last_readiness: Readiness | None = None
        #: The last task's setup commands that ran but exited non-zero (one line each).
        self.last_setup_warnings: list[str] = []

    @property
    def proxied(self) -> bool:
        """Whether OSWorld's proxy is set up on the desktop now."""
        return self.relay is not None

    def close_proxy(self) -> None:
        relay, self.relay = self.relay, None
        if relay is not None:
            relay.close()

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[OSWorldClient]:
        """The desktop's controller, over its host-side Unix socket (files come through it, read
        inside the confinement as the desktop's user; the host never opens a path the desktop controls)."""
        info = self.desktop.info()
        if info.socket is None:
            raise EnvError(f"desktop {self.desktop.name} runs no controller server, so tasks cannot be set up on it")
        client = desktop_client(info)
        try:
            yield client
        finally:
            await client.aclose()

    async def prepare(self, task: Task, cache_dir: Path) -> None:
        """Revert to the task's snapshot (one this machine does not have starts blank), with the
        internet if the task needs it (and the desktops' network mode allows), with OSWorld's
        proxy if the task asks for it and a pool file is there (`local_proxy`), then set up and
        wait until the desktop is ready for the first look (`readiness`)."""
        wanted = needs_network(task)
        self.close_proxy()  # its namespace goes with the revert
        await self._revert_to(task.snapshot if task.snapshot in SNAPSHOTS else "blank", needs_network=wanted)
        info = self.desktop.info()
        if wants_proxy(task) and info.network:
            async with self._client() as client:
                self.relay = await start_local_proxy(info.pid, client, task.id)
        self.last_setup_warnings = []
        if needs_client(task):
            async with self._client() as client:
                self.last_setup_warnings = await set_up_with(client, task, cache_dir, use_proxy=self.proxied)
                if task.config:
                    self.last_readiness = await wait_ready(client, task)

    async def score(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        if not task.evaluator:
            return None
        async with self._client() as client:
            return await score_with(client, task, cache_dir, last_action=last_action, use_proxy=self.proxied)

    async def accessibility_tree(self) -> str | None:
        """The desktop's AT-SPI tree, read by its controller server."""
        async with self._client() as client:
            return await client.accessibility_tree()

    def facts(self) -> WorkerFacts:
        """Apps run as the desktop's account and open as programs (no launcher); the account
        has sudo with its password, as on OSWorld's image (root of the desktop alone); the
        desktop says whether it reaches the internet now."""
        info = self.desktop.info()
        return WorkerFacts(
            user_name=info.user,
            home=info.home,
            sudo="with_password",
            password=self.desktop.config.password,
            open_by_exec=True,
            network=info.network,
            leaderboard_note=LEADERBOARD_NOTE,
        )
