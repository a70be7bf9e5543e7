"""Where OSWorld's own controllers reach a desktop: an HTTP ``host:port`` (an `Endpoint`).

OSWorld's `SetupController`, `PythonController` and getters take ``vm_ip`` and ``server_port``
and speak plain HTTP. `reach(target)` gives them one for the duration of a setup or scoring:

* an `Endpoint` is used as given (an OSWorld VM on its URL, auth off inside the VM, which
  the caller trusts to bound its own replies);
* a client that names its route (`OSWorldClient.door_route`: a Unix socket and/or a bearer
  token) gets a host-side `TcpForwarder` that stamps the token on every request, and, when
  the route names the desktop's network namespace, a `DesktopPortDoor` to each of the
  desktop's own ports on its own loopback (`DESKTOP_PORTS`: the browser's DevTools port 9222,
  which OSWorld's tasks forward to Chrome, and VLC's web interface on 8080), never the host's;
  it reads HTTP so that no address the desktop names is ever dialled by the host's Playwright
  or ``requests`` (its websocket URLs are rewritten to name the door, redirects refused);
* any other `TaskClient` (adb, a test shell) gets a `ClientDoor`: a small HTTP server that
  answers the OSWorld endpoints the controllers and getters call by calling the client.

A VM reached by its address (`DoorRoute.direct`) gets the same HTTP doors, to its server,
its DevTools (9222) and VLC (8080) ports: whatever the machine behind them answers, the
host's tools never follow an address it names and never read more than a desktop may send
(`environments.limits`). What the doors refused is the endpoint's `refusals`.

Every door listens on 127.0.0.1 only, accepts only this process's uid and reads HTTP with
aiohttp.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qs

from aiohttp import web

from core.shell_flag import osworld_shell
from environments.doors.desktop_door import DesktopPortDoor
from environments.doors.forward import TcpForwarder
from environments.doors.server import own_uid_only
from environments.limits import FILE_BYTES, REPLY_SLACK, too_large
from environments.tasks.client import TaskClient, command_not_run, command_output

__all__ = ["ClientDoor", "DoorRoute", "Endpoint", "Routed", "reach"]

#: OSWorld's fixed ports inside a desktop: Chrome's DevTools (tasks forward it with socat) and
#: VLC's web interface (its getters read /requests/status.xml there).
DESKTOP_PORTS = {"chromium": 9222, "vlc": 8080}
#: Why the browser's DevTools port cannot be reached through a door to the controller server.
NO_BROWSER = "the desktop's browser DevTools port is not reachable from the host through this door"
_BODY_LIMIT = FILE_BYTES + REPLY_SLACK


@dataclass(frozen=True)
class Endpoint:
    """An OSWorld controller server at ``http://host:port``, and the desktop's other ports."""

    host: str
    port: int
    chromium_port: int = 9222
    vlc_port: int = 8080
    #: None when the browser's DevTools port answers at ``host:chromium_port``, else why not.
    browser_unreachable: str | None = None
    #: What the doors in between refused of the desktop's replies so far (too large, a
    #: redirect): one line each. A score computed past a refusal is not a score.
    refusals: Callable[[], list[str]] = field(default=lambda: [], compare=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True)
class DoorRoute:
    """How to reach a client's server: a Unix socket path or ``(host, port)``, and its token."""

    upstream: str | tuple[str, int]
    token: str | None
    #: The upstream is the desktop's own address, so its other ports (DevTools, VLC) answer there too.
    direct: bool = False
    #: Gives the desktop's network namespace (``/proc/PID/ns/net``), where its browser listens.
    netns: Callable[[], str] | None = None
    #: Where a direct upstream's DevTools and VLC ports are (a fleet's forwarded ports differ).
    chromium_port: int = 9222
    vlc_port: int = 8080
    #: Why a direct upstream's DevTools port cannot be used (blocked, not forwarded), if so.
    browser_unreachable: str | None = None


@runtime_checkable
class Routed(Protocol):
    """A client that can say how its server is reached (`OSWorldClient`)."""

    def door_route(self) -> DoorRoute: ...


@contextlib.asynccontextmanager
async def reach(target: TaskClient | Endpoint) -> AsyncIterator[Endpoint]:
    """An endpoint OSWorld's controllers can use for `target`, open for the block's duration."""
    if isinstance(target, Endpoint):
        yield target
        return
    if isinstance(target, Routed):
        route = target.door_route()
        forwarder = TcpForwarder(route.upstream, token=route.token, http=True)
        browser: DesktopPortDoor | None = None
        vlc: DesktopPortDoor | None = None
        if route.netns is not None:  # the desktop's own loopback, inside its network namespace
            browser = DesktopPortDoor(DESKTOP_PORTS["chromium"], route.netns)
            vlc = DesktopPortDoor(DESKTOP_PORTS["vlc"], route.netns, pass_authorization=True)
        elif route.direct and not isinstance(route.upstream, str):  # a VM: its other ports at its address
            host = route.upstream[0]
            browser = None if route.browser_unreachable else DesktopPortDoor(route.chromium_port, host=host)
            vlc = DesktopPortDoor(route.vlc_port, host=host, pass_authorization=True)
        doors = [door for door in (browser, vlc) if door is not None]

        def refusals() -> list[str]:
            return [*forwarder.refusals, *(line for door in doors for line in door.refusals)]

        try:
            vlc_port = DESKTOP_PORTS["vlc"] if vlc is None else vlc.port
            if browser is None:
                yield Endpoint("127.0.0.1", forwarder.port, vlc_port=vlc_port, refusals=refusals,
                               browser_unreachable=route.browser_unreachable or NO_BROWSER)  # fmt: skip
            else:
                yield Endpoint("127.0.0.1", forwarder.port, chromium_port=browser.port, vlc_port=vlc_port,
                               refusals=refusals)  # fmt: skip
        finally:
            forwarder.close()
            for port_door in doors:
                port_door.close()
        return
    client_door = ClientDoor(target)
    await client_door.start()
    try:
        yield Endpoint("127.0.0.1", client_door.port, browser_unreachable=NO_BROWSER,
                       refusals=lambda: list(client_door.refusals))  # fmt: skip
    finally:
        await client_door.close()


class _Reply:
    def __init__(self, status: int, body: bytes | str | dict[str, Any], content_type: str = "") -> None:
        self.status = status
        if isinstance(body, dict):
            self.body, self.content_type = json.dumps(body).encode(), "application/json"
        elif isinstance(body, str):
            self.body, self.content_type = body.encode(), "text/plain; charset=utf-8"
        else:
            self.body, self.content_type = body, "application/octet-stream"
        if content_type:
            self.content_type = content_type


def _error(status: int, message: str) -> _Reply:
    return _Reply(status, {"status": "error", "message": message})


def _multipart(content_type: str, body: bytes) -> dict[str, bytes]:
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
    )
    fields: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str):
            fields[name] = payload if isinstance(payload, bytes) else b""
    return fields


class ClientDoor:
    """The OSWorld controller endpoints, served on 127.0.0.1 by calling a `TaskClient`.

    Shapes follow OSWorld's server (see ``../reference/osworld.md`` §1.3): ``/execute`` answers
    200 with ``returncode`` even for a non-zero exit and 500 when the command could not run;
    ``/file`` answers 404 for a missing file; unknown paths answer 404.
    """

    def __init__(self, client: TaskClient) -> None:
        self.client = client
        self.port = 0
        self.refused = 0
        #: Replies refused for their size, one line each (`Endpoint.refusals`).
        self.refusals: list[str] = []
        self._server: asyncio.Server | None = None
        self._web: web.Server | None = None

    async def start(self) -> None:
        self._web = web.Server(self._handle, max_line_size=65536, max_field_size=65536)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(own_uid_only(self, self._web), "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            if self._web is not None:
                await self._web.shutdown(0.05)
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        reply = await self._answer(request)
        out = web.Response(status=reply.status, reason="OK" if reply.status == 200 else "Error", body=reply.body,
                           content_type=None, headers={"Content-Type": reply.content_type})  # fmt: skip
        out.force_close()
        return out

    async def _answer(self, request: web.BaseRequest) -> _Reply:
        length = request.content_length or 0
        if length > _BODY_LIMIT:
            return _error(413, f"body of {length} bytes exceeds the limit")
        body = await request.content.readexactly(length) if length else b""
        try:
            return await self._route(request.method, request.path, request.headers.get("Content-Type", ""), body)
        except FileNotFoundError as exc:
            return _error(404, f"not found: {exc}")
        except (KeyError, ValueError, TypeError) as exc:
            return _error(400, f"bad request: {exc}")
        except Exception as exc:  # the controllers read any failure as a 500, as from OSWorld's server
            if getattr(exc, "status", None) == 413:  # the client refused a reply too large to read
                self.refusals.append(str(exc))
                return _error(413, str(exc))
            return _error(500, f"{type(exc).__name__}: {exc}")

    async def _route(self, method: str, path: str, content_type: str, body: bytes) -> _Reply:
        client = self.client
        if method == "GET" and path == "/terminal":
            return _Reply(200, {"output": None, "status": "success"})
        if method != "POST":
            return _error(404, f"{method} {path} is not served by this door")
        if path in ("/execute", "/setup/execute"):
            data = json.loads(body)
            reply = await client.execute(data["command"], shell=osworld_shell(data.get("shell")))
            problem = command_not_run(reply)
            if problem is not None:
                return _error(500, problem)
            code, out, err = command_output(reply)
            return _Reply(200, {"status": "success", "output": out, "error": err, "returncode": code})
        if path == "/setup/launch":
            data = json.loads(body)
            await client.launch(data["command"], shell=osworld_shell(data.get("shell")))
            return _Reply(200, f"{data['command']} launched successfully")
        if path == "/setup/open_file":
            await client.open_file(str(json.loads(body)["path"]))
            return _Reply(200, "File opened successfully")
        if path in ("/setup/activate_window", "/setup/close_window"):
            data = json.loads(body)
            call = client.activate_window if path.endswith("activate_window") else client.close_window
            await call(
                str(data["window_name"]), strict=bool(data.get("strict")), by_class=bool(data.get("by_class"))
            )
            return _Reply(200, "Window handled successfully")
        if path == "/setup/upload":
            fields = _multipart(content_type, body)
            await client.upload(fields["file_path"].decode(), fields["file_data"])
            return _Reply(200, f"File Uploaded: {len(fields['file_data'])} bytes")
        if path == "/file":
            file_path = parse_qs(body.decode())["file_path"][0]
            data = await client.file(file_path)
            if data is None:
                return _error(404, f"file not found: {file_path}")
            if len(data) > FILE_BYTES:
                self.refusals.append(too_large(f"the desktop's file {file_path}", len(data), FILE_BYTES))
                return _error(413, self.refusals[-1])
            return _Reply(200, data)
        if path == "/screen_size":
            width, height = await client.screen_size()
            return _Reply(200, {"width": width, "height": height})
        return _error(404, f"POST {path} is not served by this door")
