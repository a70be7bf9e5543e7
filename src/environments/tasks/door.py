"""Where OSWorld's own controllers reach a desktop: an HTTP ``host:port`` (an `Endpoint`).

OSWorld's `SetupController`, `PythonController` and getters take ``vm_ip`` and ``server_port``
and speak plain HTTP. `reach(target)` gives them one for the duration of a setup or scoring:

* an `Endpoint` is used as given (an OSWorld VM on its URL, auth off inside the VM);
* a client that names its route (`OSWorldClient.door_route`: a Unix socket and/or a bearer
  token) gets a host-side `TcpForwarder` that stamps the token on every request, and, when
  the route names the desktop's network namespace, one to each of the desktop's own ports
  on its own loopback (`DESKTOP_PORTS`: the browser's DevTools port 9222, which OSWorld's
  tasks forward to Chrome, and VLC's web interface on 8080), never the host's;
* any other `TaskClient` (adb, a test shell) gets a `ClientDoor`: a small HTTP server that
  answers the OSWorld endpoints the controllers and getters call by calling the client.

Both doors listen on 127.0.0.1 only and accept only this process's uid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qs

from environments.shell_flag import osworld_shell
from environments.tasks.client import TaskClient, command_not_run, command_output

__all__ = ["ClientDoor", "DoorRoute", "Endpoint", "Routed", "reach"]

#: OSWorld's fixed ports inside a desktop: Chrome's DevTools (tasks forward it with socat) and
#: VLC's web interface (its getters read /requests/status.xml there).
DESKTOP_PORTS = {"chromium": 9222, "vlc": 8080}
#: Why the browser's DevTools port cannot be reached through a door to the controller server.
NO_BROWSER = "the desktop's browser DevTools port is not reachable from the host through this door"
_BODY_LIMIT = 512 * 1024 * 1024


@dataclass(frozen=True)
class Endpoint:
    """An OSWorld controller server at ``http://host:port``, and the desktop's other ports."""

    host: str
    port: int
    chromium_port: int = 9222
    vlc_port: int = 8080
    #: None when the browser's DevTools port answers at ``host:chromium_port``, else why not.
    browser_unreachable: str | None = None

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
        if route.direct and route.token is None and not isinstance(route.upstream, str):
            yield Endpoint(*route.upstream, chromium_port=route.chromium_port, vlc_port=route.vlc_port,
                           browser_unreachable=route.browser_unreachable)
            return
        from environments.local.forward import TcpForwarder

        forwarder = TcpForwarder(route.upstream, token=route.token)
        browser: TcpForwarder | None = None
        vlc: TcpForwarder | None = None
        if route.netns is not None:
            # A local desktop's own ports, on its own loopback: DevTools (9222) and VLC's web interface (8080).
            browser = TcpForwarder(("127.0.0.1", DESKTOP_PORTS["chromium"]), netns=route.netns)
            vlc = TcpForwarder(("127.0.0.1", DESKTOP_PORTS["vlc"]), netns=route.netns)
        elif route.direct and not isinstance(route.upstream, str):
            # A server that wants a token at a direct address: its other ports go through plain doors.
            host = route.upstream[0]
            browser = None if route.browser_unreachable else TcpForwarder((host, route.chromium_port))
            vlc = TcpForwarder((host, route.vlc_port))
        try:
            vlc_port = DESKTOP_PORTS["vlc"] if vlc is None else vlc.port
            if browser is None:
                yield Endpoint("127.0.0.1", forwarder.port, vlc_port=vlc_port,
                               browser_unreachable=route.browser_unreachable or NO_BROWSER)
            else:
                yield Endpoint("127.0.0.1", forwarder.port, chromium_port=browser.port, vlc_port=vlc_port)
        finally:
            for opened in (forwarder, browser, vlc):
                if opened is not None:
                    opened.close()
        return
    door = ClientDoor(target)
    await door.start()
    try:
        yield Endpoint("127.0.0.1", door.port, browser_unreachable=NO_BROWSER)
    finally:
        await door.close()


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
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from environments.local.forward import peer_uid

        try:
            peer = writer.get_extra_info("peername")
            if peer_uid((peer[0], peer[1]), ("127.0.0.1", self.port)) != os.getuid():
                self.refused += 1
                return
            reply = await self._handle(reader)
            head = (
                f"HTTP/1.1 {reply.status} {'OK' if reply.status == 200 else 'Error'}\r\n"
                f"Content-Type: {reply.content_type}\r\nContent-Length: {len(reply.body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(head.encode() + reply.body)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader) -> _Reply:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        request_line, *header_lines = head.rstrip("\r\n").split("\r\n")
        method, target, _ = request_line.split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
        length = int(headers.get("content-length") or 0)
        if length > _BODY_LIMIT:
            return _error(413, f"body of {length} bytes exceeds the limit")
        body = await reader.readexactly(length) if length else b""
        try:
            return await self._route(method, target.split("?")[0], headers.get("content-type", ""), body)
        except FileNotFoundError as exc:
            return _error(404, f"not found: {exc}")
        except (KeyError, ValueError, TypeError) as exc:
            return _error(400, f"bad request: {exc}")
        except Exception as exc:  # the controllers read any failure as a 500, as from OSWorld's server
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
            return _Reply(200, data)
        if path == "/screen_size":
            width, height = await client.screen_size()
            return _Reply(200, {"width": width, "height": height})
        return _error(404, f"POST {path} is not served by this door")
