"""The host-side doors: token injection per request, one request per connection, own uid only."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest
import requests

from environments.doors.desktop_door import DesktopPortDoor
from environments.doors.forward import TcpForwarder, peer_uid
from environments.tasks.door import ClientDoor

TOKEN = "s3cret-token-for-tests"


class _Echo(BaseHTTPRequestHandler):
    """Answers 401 without the right bearer token, else echoes the headers and body it got."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            payload, status = b'{"status": "error"}', 401
        else:
            seen = {
                "auth": self.headers.get_all("Authorization"),
                "connection": self.headers.get("Connection"),
            }
            payload, status = json.dumps(seen | {"body": body.decode()}).encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "keep-alive")
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, *_: object) -> None:
        return None


class _UnixServer(ThreadingHTTPServer):
    address_family = socket.AF_UNIX

    def server_bind(self) -> None:
        self.socket.bind(self.server_address)
        self.server_name, self.server_port = "desktop", 0


@pytest.fixture
def unix_server(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "ctl.sock")
    server = _UnixServer(path, _Echo)  # type: ignore[arg-type]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield path
    server.shutdown()
    server.server_close()


def test_door_stamps_every_request_and_replaces_a_callers_token(unix_server: str) -> None:
    with TcpForwarder(unix_server, token=TOKEN) as door, requests.Session() as session:
        for n in range(3):  # one pooled session: each request must still be stamped
            reply = session.post(
                f"{door.url}/execute", data=f"body {n}", headers={"Authorization": "Bearer wrong"}
            )
            assert reply.status_code == 200
            seen = reply.json()
            assert seen == {"auth": [f"Bearer {TOKEN}"], "connection": "close", "body": f"body {n}"}
            assert reply.headers["Connection"] == "close"
        big = "x" * 300_000  # a body larger than one read
        assert session.post(f"{door.url}/setup/upload", data=big).json()["body"] == big


def test_door_without_token_relays_bytes_unchanged(unix_server: str) -> None:
    with TcpForwarder(unix_server) as door:
        assert requests.get(f"{door.url}/terminal", timeout=10).status_code == 401
        assert requests.get(
            f"{door.url}/terminal", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        ).ok


def test_peer_uid_reads_the_connecting_sockets_owner() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, peer = server.accept()
            with accepted:
                assert peer_uid(peer, ("127.0.0.1", port)) == os.getuid()
                assert peer_uid(peer, ("127.0.0.1", port + 1 if port < 65535 else 1)) is None
                assert client.getsockname() == peer


_PROBE = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
try:
    s.sendall(b"GET /terminal HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
    print(repr(s.recv(100)))
except ConnectionResetError:
    print("reset")
"""


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_door_refuses_another_users_connection(unix_server: str) -> None:
    with TcpForwarder(unix_server, token=TOKEN) as door:
        other = subprocess.run(
            ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable, "-I", "-c", _PROBE,
             str(door.port)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert other.returncode == 0, other.stderr
        assert other.stdout.strip() in ("b''", "reset")  # closed without a byte of reply
        assert door.refused == 1
        own = subprocess.run(
            [sys.executable, "-I", "-c", _PROBE, str(door.port)], capture_output=True, text=True, timeout=60
        )
        assert "200 OK" in own.stdout


class _Hostile(BaseHTTPRequestHandler):
    """What a desktop's server could answer if it were the model's: by path, a redirect to
    the host, a reply larger than the door's limit (declared, or streamed without a length),
    or the server's own 413 for a file too large."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/steal")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/declared":
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 30))
            self.end_headers()
        elif self.path == "/stream":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for _ in range(64):
                    self.wfile.write(b"z" * 65536)
            except OSError:
                pass
            self.close_connection = True
        else:
            body = b'{"error": "the desktop\'s file /x is 1024.0 MiB, over the 256 MiB limit"}'
            self.send_response(413)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        return None


def test_door_refuses_redirects_and_oversized_replies_and_says_so(tmp_path: Path) -> None:
    path = str(tmp_path / "hostile.sock")
    server = _UnixServer(path, _Hostile)  # type: ignore[arg-type]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with TcpForwarder(path, token=TOKEN, body_limit=1 << 20) as door:
            redirect = requests.post(f"{door.url}/redirect", timeout=10)  # requests would follow a 302
            declared = requests.post(f"{door.url}/declared", timeout=10)
            with pytest.raises(requests.exceptions.RequestException):  # cut short, never longer
                requests.post(f"{door.url}/stream", timeout=10)
            own = requests.post(f"{door.url}/file", timeout=10)
            refusals = list(door.refusals)
    finally:
        server.shutdown()
        server.server_close()
    assert redirect.status_code == 502 and "redirect" in redirect.json()["message"]
    assert not redirect.history  # nothing followed
    assert declared.status_code == 502 and "over the limit" in declared.json()["message"]
    assert own.status_code == 413
    assert [line.split(":")[0] for line in refusals] == ["POST /redirect HTTP/1.1", "POST /declared HTTP/1.1",
                                                          "POST /stream HTTP/1.1", "POST /file HTTP/1.1"]  # fmt: skip
    assert "1024.0 MiB, over the 256 MiB limit" in refusals[-1]


def test_peer_uid_reads_the_table_where_the_kernel_cannot_be_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from environments.doors import server as door_server

    def no_netlink(*_: object) -> None:
        raise OSError("no sock_diag here")

    monkeypatch.setattr(door_server, "_diag_uid", no_netlink)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            accepted, peer = server.accept()
            with accepted:
                assert peer_uid(peer, ("127.0.0.1", port)) == os.getuid()
                assert peer_uid(peer, ("127.0.0.1", port + 1 if port < 65535 else 1)) is None


def _probe_as_nobody(port: int) -> str:
    other = subprocess.run(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable, "-I", "-c", _PROBE,
         str(port)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert other.returncode == 0, other.stderr
    return other.stdout.strip()


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_every_door_refuses_another_users_connection() -> None:
    """The desktop-port door and the door that calls a client share the controller door's wall."""
    with DesktopPortDoor(9, host="127.0.0.1") as door:
        assert _probe_as_nobody(door.port) in ("b''", "reset")
        assert door.refused == 1

    async def client_door() -> tuple[str, int]:
        door = ClientDoor(cast(Any, object()))  # never called: the connection is refused first
        await door.start()
        try:
            return await asyncio.to_thread(_probe_as_nobody, door.port), door.refused
        finally:
            await door.close()

    assert asyncio.run(client_door()) in (("b''", 1), ("reset", 1))


def test_closing_a_door_with_a_connection_open_logs_no_error(unix_server: str, caplog: pytest.LogCaptureFixture) -> None:
    """A client still connected when the door closes is cancelled quietly: Python 3.11 logs a
    cancelled connection handler as "Exception in callback" unless the handler ends itself."""
    caplog.set_level("DEBUG", logger="asyncio")
    door = TcpForwarder(unix_server)
    client = socket.create_connection(("127.0.0.1", door.port), timeout=10)
    try:
        client.sendall(b"GET /terminal HTTP/1.1\r\nHost: desktop\r\n\r\n")
        assert client.recv(12).startswith(b"HTTP/1.1 401")  # piped, and kept alive: the pipe stays open
        door.close()
    finally:
        client.close()
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert not errors, [r.getMessage() for r in errors]
