"""The server-backed environment of a local desktop (an `OSWorldDesktop` over its client)."""

from __future__ import annotations

from collections.abc import Callable

from core.protocols import EnvError, Environment
from environments.osworld import OSWorldClient, OSWorldDesktop

from .desktop import DesktopInfo, LocalDesktop
from .spawner import run_blocking

__all__ = ["desktop_client", "server_environment"]


def desktop_client(
    info: DesktopInfo, *, timeout: float = 30.0, netns: Callable[[], str] | None = None
) -> OSWorldClient:
    """A client of the desktop's controller over its host-side Unix socket (the only way in).

    ``netns`` names the desktop's network namespace when a door to its browser opens (by
    default that of ``info``'s X server; pass a callable that follows reverts).
    """
    token = info.token()
    if info.socket is None or token is None:
        raise EnvError(f"desktop {info.name} runs no controller server; start it with server=True")
    pid = info.pid
    return OSWorldClient(
        "http://desktop",
        token=token,
        timeout=timeout,
        uds=info.socket,
        netns=netns or (lambda: f"/proc/{pid}/ns/net"),
    )


def server_environment(desktop: LocalDesktop, *, action_timeout: float = 30.0) -> Environment:
    """An `OSWorldDesktop` talking to ``desktop``'s controller server, reverting it locally."""
    client = desktop_client(desktop.info(), netns=lambda: f"/proc/{desktop.info().pid}/ns/net")

    async def revert() -> None:
        await run_blocking(desktop.revert)

    return OSWorldDesktop(
        client, name=desktop.name, revert=revert, action_timeout=action_timeout, with_sandbox=desktop.config.sandbox
    )
