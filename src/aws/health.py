"""Is the desktop inside an instance ready? A running instance is not yet a usable desktop.

The default probe asks the in-VM server for a screenshot (the server answers before the
desktop session is up; a PNG means both are). Probes are plain async callables of the
server's base URL, so tests and other servers can supply their own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx

__all__ = ["HealthProbe", "HttpProbe", "wait_healthy"]

#: ``await probe(base_url)`` is True when the desktop behind `base_url` is ready.
HealthProbe = Callable[[str], Awaitable[bool]]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class HttpProbe:
    """GET ``<base>/screenshot`` (with a bearer token if the server wants one) and expect a PNG."""

    def __init__(self, token: str | None = None, *, path: str = "/screenshot", timeout: float = 10.0) -> None:
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.path = path
        self.timeout = timeout

    def __repr__(self) -> str:  # never show the token
        return f"HttpProbe(path={self.path!r})"

    async def __call__(self, base_url: str) -> bool:
        try:
            async with httpx.AsyncClient(timeout=self.timeout, trust_env=False) as http:
                response = await http.get(base_url.rstrip("/") + self.path, headers=self._headers)
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        return self.path != "/screenshot" or response.content.startswith(_PNG_MAGIC)


async def wait_healthy(
    probe: HealthProbe,
    base_url: str,
    *,
    timeout: float,
    interval: float,
    alive: Callable[[], Awaitable[bool]] | None = None,
) -> bool:
    """Probe until healthy (True) or `timeout` passes or `alive()` says the instance died (False)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if await probe(base_url):
                return True
        except Exception:  # a faulty probe counts as not ready, never as ready
            pass
        if time.monotonic() + interval > deadline:
            return False
        if alive is not None and not await alive():
            return False
        await asyncio.sleep(interval)
