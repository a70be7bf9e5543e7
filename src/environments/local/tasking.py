"""A local desktop's task handling: revert to the task's snapshot, set up and score the task
through the desktop's controller server, and the facts a worker on it needs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from core.protocols import EnvError, WorkerFacts
from core.trajectory import Task
from environments.osworld.client import OSWorldClient
from environments.osworld.proxy import wants_proxy
from environments.tasks.handling import needs_client, score_with, set_up_with
from environments.tasks.network import needs_network

from .local_proxy import close_proxy, proxied, start_local_proxy
from .server_env import desktop_client
from .snapshot import SNAPSHOTS

if TYPE_CHECKING:
    from .environment import LocalEnvironment

__all__ = ["accessibility_tree", "facts", "prepare", "score"]


@asynccontextmanager
async def _client(env: LocalEnvironment) -> AsyncIterator[OSWorldClient]:
    """The desktop's controller, over its host-side Unix socket (files come through it, read
    inside the confinement as the desktop's user; the host never opens a path the desktop controls)."""
    info = env.info
    if info.socket is None:
        raise EnvError(f"desktop {env.name} runs no controller server, so tasks cannot be set up on it")
    client = desktop_client(info)
    try:
        yield client
    finally:
        await client.aclose()


async def prepare(env: LocalEnvironment, task: Task, cache_dir: Path) -> None:
    """Revert to the task's snapshot (one this machine does not have starts blank), with the
    internet if the task needs it (and the desktops' network mode allows), with OSWorld's
    proxy if the task asks for it and a pool file is there (`local_proxy`), then set up."""
    wanted = needs_network(task.to_osworld())
    close_proxy(env)  # its namespace goes with the revert
    await env.revert_to(task.snapshot if task.snapshot in SNAPSHOTS else "blank", needs_network=wanted)
    if wants_proxy(task) and env.info.network:
        async with _client(env) as client:
            await start_local_proxy(env, client, task.id)
    if needs_client(task):
        async with _client(env) as client:
            await set_up_with(client, task, cache_dir, use_proxy=proxied(env))


async def score(
    env: LocalEnvironment, task: Task, cache_dir: Path, *, last_action: str | None
) -> float | None:
    if not task.evaluator:
        return None
    async with _client(env) as client:
        return await score_with(client, task, cache_dir, last_action=last_action, use_proxy=proxied(env))


async def accessibility_tree(env: LocalEnvironment) -> str | None:
    """The desktop's AT-SPI tree, read by its controller server."""
    async with _client(env) as client:
        return await client.accessibility_tree()


#: A local desktop runs Debian's builds of OSWorld's apps and Chromium where tasks name Chrome
#: (`environments.server.app_names`), so its scores are not the leaderboard's.
LEADERBOARD_NOTE = "not leaderboard-comparable (Debian app versions, Chromium for Chrome)"


def facts(env: LocalEnvironment) -> WorkerFacts:
    """Apps run as the desktop's unprivileged account and open as programs (no launcher);
    the desktop says whether it reaches the internet now."""
    info = env.info
    return WorkerFacts(
        user_name=info.user,
        home=info.home,
        open_by_exec=True,
        network=info.network,
        leaderboard_note=LEADERBOARD_NOTE,
    )
