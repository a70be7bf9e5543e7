"""The door to a desktop's own port (its DevTools) speaks only for that desktop: URLs in its
replies name the door, redirects are refused, replies are bounded, websockets pass.

The "desktop" here is a small HTTP server on this machine's loopback, reached from inside
this process's own network namespace, that answers what a hostile desktop would; listeners
of the host count whether anything followed an address it named."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from environments.doors import desktop_door
from environments.doors.desktop_door import REPLY_LIMIT, DesktopPortDoor, rewrite_urls

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="entering a network namespace needs root")

Answer = Callable[[http.server.BaseHTTPRequestHandler], None]


class _Desktop:
    """An HTTP server whose every GET is answered by `answer`; it records the heads it saw."""

    def __init__(self, answer: Answer) -> None:
        seen: list[dict[str, str]] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:
                seen.append({k.lower(): v for k, v in self.headers.items()} | {":path": self.path})
                answer(self)

            do_PUT = do_GET

        self.seen = seen
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Listener:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    found = _Listener()
    yield found
    found.sock.close()


def _door(answer: Answer, *, pass_authorization: bool = False) -> tuple[_Desktop, DesktopPortDoor]:
    desktop = _Desktop(answer)
    return desktop, DesktopPortDoor(desktop.port, lambda: "/proc/self/ns/net", pass_authorization=pass_authorization)


def _send(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes = b"", **headers: str) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _get(port: int, path: str, *, extra: str = "") -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    first, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(first.split()[1]), headers, body


def test_websocket_urls_in_a_reply_name_the_door_and_data_stays(listener: _Listener) -> None:
    version = {
        "Browser": "Chrome/1",
        "webSocketDebuggerUrl": f"ws://127.0.0.1:{listener.port}/devtools/browser/x",
        "pages": [{"url": "https://example.com/ws://not-a-target", "title": "see wss://text",
                   "devtoolsFrontendUrl": f"/devtools/inspector.html?ws=10.0.0.9:{listener.port}/devtools/page/1&x=1"}],
    }  # fmt: skip
    desktop, door = _door(lambda h: _send(h, 200, json.dumps(version).encode(), Content_Type="application/json"))
    try:
        status, headers, body = _get(door.port, "/json/version/", extra="Authorization: Bearer secret\r\n")
    finally:
        door.close()
        desktop.close()
    assert status == 200 and headers["connection"] == "close"
    reply = json.loads(body)
    assert reply["webSocketDebuggerUrl"] == f"ws://127.0.0.1:{door.port}/devtools/browser/x"
    page = reply["pages"][0]
    assert page["devtoolsFrontendUrl"] == f"/devtools/inspector.html?ws=127.0.0.1:{door.port}/devtools/page/1&x=1"
    assert page["url"] == version["pages"][0]["url"] and page["title"] == "see wss://text"  # data, not addresses
    seen = desktop.seen[0]
    assert seen["host"] == f"127.0.0.1:{door.port}" and "authorization" not in seen  # Chrome names the door
    assert listener.accepted == 0


def test_authorization_reaches_only_a_service_that_takes_it() -> None:
    """VLC's web interface wants OSWorld's known password (HTTP basic auth, sent by OSWorld's
    getters); DevTools wants none, so its door drops the header."""
    heard = []
    for passes in (False, True):
        desktop, door = _door(lambda h: _send(h, 200, b"ok"), pass_authorization=passes)
        try:
            status, _, _ = _get(door.port, "/requests/status.xml", extra="Authorization: Basic OnBhc3N3b3Jk\r\n")
        finally:
            door.close()
            desktop.close()
        assert status == 200
        heard.append(desktop.seen[0].get("authorization"))
    assert heard == [None, "Basic OnBhc3N3b3Jk"]


@pytest.mark.parametrize("upgrade", [False, True], ids=["plain", "websocket-upgrade"])
def test_a_redirect_is_refused_and_never_followed(listener: _Listener, upgrade: bool) -> None:
    target = f"http://127.0.0.1:{listener.port}/json/version/"
    desktop, door = _door(lambda h: _send(h, 302, Location=target))
    extra = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: x\r\nSec-WebSocket-Version: 13\r\n"
    try:
        status, headers, body = _get(door.port, "/devtools/browser/x", extra=extra if upgrade else "")
    finally:
        door.close()
        desktop.close()
    assert status == 502 and "location" not in headers
    assert "redirect" in json.loads(body)["message"]
    assert listener.accepted == 0 and door.refusals


class _WebSocketDesktop:
    """A desktop's websocket endpoint (aiohttp, on a loop of its own): it answers each text
    message upper-cased and each binary one reversed, then, asked ``flood``, sends ``n``
    messages of 800 bytes; it records the handshake's headers."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.runner = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result()

    async def _start(self) -> web.AppRunner:
        app = web.Application()
        app.router.add_get("/devtools/browser/x", self._socket)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(runner.addresses[0][1])
        return runner

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        self.seen.append({k.lower(): v for k, v in request.headers.items()})
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT and message.data.startswith("flood"):
                for _ in range(int(message.data.split()[1])):
                    await ws.send_bytes(b"f" * 800)
            elif message.type == aiohttp.WSMsgType.TEXT:
                await ws.send_str(message.data.upper())
            elif message.type == aiohttp.WSMsgType.BINARY:
                await ws.send_bytes(message.data[::-1])
        return ws

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)


async def _talk(port: int, *sent: str | bytes, replies: int) -> list[str | bytes]:
    got: list[str | bytes] = []
    async with aiohttp.ClientSession() as session, session.ws_connect(
        f"ws://127.0.0.1:{port}/devtools/browser/x", headers={"Authorization": "Bearer secret"}
    ) as ws:
        for message in sent:
            await (ws.send_str(message) if isinstance(message, str) else ws.send_bytes(message))
        async for reply in ws:
            if reply.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                break
            got.append(reply.data)
            if len(got) == replies:
                break
    return got


def test_a_websocket_passes_both_ways_message_by_message() -> None:
    desktop = _WebSocketDesktop()
    door = DesktopPortDoor(desktop.port, lambda: "/proc/self/ns/net")
    try:
        got = asyncio.run(_talk(door.port, "hello", b"abc", replies=2))
    finally:
        door.close()
        desktop.close()
    assert got == ["HELLO", b"cba"]
    seen = desktop.seen[0]
    assert seen["host"] == f"127.0.0.1:{door.port}" and "authorization" not in seen


def test_a_websocket_ends_past_the_stream_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(desktop_door, "STREAM_LIMIT", 2000)
    desktop = _WebSocketDesktop()
    door = DesktopPortDoor(desktop.port, lambda: "/proc/self/ns/net")
    try:
        got = asyncio.run(_talk(door.port, "flood 10", replies=10))
    finally:
        door.close()
        desktop.close()
    assert len(got) == 2  # 1600 bytes passed; the third message would make 2400


def test_a_switch_that_is_no_websocket_handshake_is_refused() -> None:
    """A desktop that answers 101 and then speaks anything (no valid handshake) gets no stream."""

    def switch(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(101)
        h.send_header("Upgrade", "websocket")
        h.send_header("Connection", "Upgrade")
        h.end_headers()
        h.wfile.flush()
        h.close_connection = True

    desktop, door = _door(switch)
    extra = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" \
            "Sec-WebSocket-Version: 13\r\n"
    try:
        status, _, body = _get(door.port, "/devtools/browser/x", extra=extra)
    finally:
        door.close()
        desktop.close()
    assert status == 502 and "handshake" in json.loads(body)["message"]
    assert door.refusals


def test_the_door_dials_no_address_but_the_desktops_port() -> None:
    door = DesktopPortDoor(9, host="127.0.0.1")
    try:
        with pytest.raises(OSError, match="dials only"):
            door._socket((socket.AF_INET, socket.SOCK_STREAM, 0, "", ("127.0.0.1", 10)))
        door._socket((socket.AF_INET, socket.SOCK_STREAM, 0, "", ("127.0.0.1", 9))).close()
    finally:
        door.close()


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "until-close"])
def test_a_reply_over_the_limit_is_refused(declared: bool) -> None:
    def huge(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        if declared:
            h.send_header("Content-Length", str(1 << 30))
        h.send_header("Connection", "close")
        h.end_headers()
        block = b"0" * (1 << 20)
        try:
            for _ in range((REPLY_LIMIT >> 20) + 8):
                h.wfile.write(block)
        except OSError:
            pass
        h.close_connection = True

    desktop, door = _door(huge)
    try:
        status, _, body = _get(door.port, "/json/list")
    finally:
        door.close()
        desktop.close()
    assert status == 502 and "limit" in json.loads(body)["message"]


def test_a_websocket_address_outside_json_is_refused(listener: _Listener) -> None:
    text = f"see ws://127.0.0.1:{listener.port}/x".encode()
    desktop, door = _door(lambda h: _send(h, 200, text, Content_Type="text/plain"))
    try:
        status, _, _ = _get(door.port, "/json/version/")
    finally:
        door.close()
        desktop.close()
    assert status == 502


def test_rewrite_keeps_the_path_and_drops_userinfo() -> None:
    door = "127.0.0.1:5555"
    assert rewrite_urls("wss://user:pw@evil:1/a?b=c#f", door) == "wss://127.0.0.1:5555/a?b=c"
    assert rewrite_urls({"x": ["ws://[::1]:9/q"]}, door) == {"x": ["ws://127.0.0.1:5555/q"]}
    assert rewrite_urls("https://devtools/x.html?wss=evil%3A1%2Fp", door) == "https://devtools/x.html?wss=127.0.0.1:5555/p"
