"""The server-backed environment of a local desktop (an `OSWorldDesktop` over its client)."""

from __future__ import annotations

from core.protocols import EnvError, Environment
from environments.osworld import OSWorldClient, OSWorldDesktop

from .desktop import LocalDesktop
from .spawner import run_blocking

__all__ = ["server_environment"]


def server_environment(desktop: LocalDesktop, *, action_timeout: float = 30.0) -> Environment:
    """An `OSWorldDesktop` talking to ``desktop``'s controller server, reverting it locally."""
    info = desktop.info()
    token = info.token()
    if info.base_url is None or token is None:
        raise EnvError(f"desktop {desktop.name} runs no controller server; start it with server=True")
    client = OSWorldClient(info.base_url, token=token)

    async def revert() -> None:
        await run_blocking(desktop.revert)

    return OSWorldDesktop(client, name=desktop.name, revert=revert, action_timeout=action_timeout)
