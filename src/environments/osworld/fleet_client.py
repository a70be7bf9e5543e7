"""The client of a desktop on a fleet machine: every request goes to the machine's current
instance (which a revert replaces), requests that may change the desktop mark it used, and
OSWorld's own controllers are routed to the instance's server, DevTools and VLC ports where
the fleet found them (`aws.Machine.reach`)."""

from __future__ import annotations

import httpx

from aws import Machine
from core.protocols import EnvError
from environments.osworld.client import OSWorldClient
from environments.tasks.door import DoorRoute

__all__ = ["FleetClient"]


#: Requests that only read the desktop; anything else marks it used (a revert is then due).
_READS = frozenset(
    {"/screenshot", "/screen_size", "/cursor_position", "/platform", "/accessibility", "/terminal",
     "/file", "/list_directory", "/window_size", "/wallpaper", "/desktop_path", "/obs_winagent"}
)  # fmt: skip


class _CurrentInstance(httpx.AsyncBaseTransport):
    """Sends each request to the machine's current server URL; records desktop-changing calls."""

    def __init__(self, machine: Machine) -> None:
        self._machine = machine
        self._inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=4, max_keepalive_connections=1))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        base = self._machine.url
        if base is None:
            raise httpx.ConnectError(f"{self._machine.name} has no instance right now", request=request)
        target = httpx.URL(base)
        request.url = request.url.copy_with(scheme=target.scheme, host=target.host, port=target.port)
        request.headers["Host"] = target.netloc.decode("ascii")
        if request.url.path not in _READS:
            self._machine.mark_used()
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class FleetClient(OSWorldClient):
    """The desktop's client; OSWorld's controllers reach the current instance's ports through it."""

    def __init__(self, machine: Machine, token: str | None) -> None:
        super().__init__(f"http://{machine.name}", token=token, transport=_CurrentInstance(machine),
                         door_url=lambda: machine.url)
        self._machine = machine

    def door_route(self) -> DoorRoute:
        reach = self._machine.reach
        if reach is None:
            raise EnvError(f"{self._machine.name} has no instance right now")
        states = self._machine.ports
        browser = None
        if "chromium" not in reach.ports or states.get("chromium") == "blocked":
            browser = (f"the DevTools port of {self._machine.name} is not reachable from this host "
                       f"(open or forward it: chromium_port)")
        return DoorRoute((reach.host, reach.ports["server"]), self._token, direct=True,
                         chromium_port=reach.ports.get("chromium", 9222), vlc_port=reach.ports.get("vlc", 8080),
                         browser_unreachable=browser)
