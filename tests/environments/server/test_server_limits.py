"""Requests that try to switch the server's limits off: lenient flags, unbounded timeouts,
connections that never finish their headers."""

from __future__ import annotations

import asyncio
import selectors
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from environments.server.bodies import BODY_TIMEOUT_S

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

#: The two timeout tests wait out the server's own limits; the server they talk to is the real
#: one with its limit constants set this short (the product's values are only waited on).
_SHORT_BODY_S = 2.0
_SHORT_HEADER_S = 2.0
_SHORT_LIMITS = """#!{python}
import runpy, sys
import environments.server.bodies as bodies
import environments.server.serve as serve
for module, name in ((bodies, "BODY_TIMEOUT_S"), (serve, "HEADER_TIMEOUT_S")):
    if not hasattr(module, name):  # a rename must fail here, not leave the product's value
        sys.exit(f"{{module.__name__}} has no {{name}}")
bodies.BODY_TIMEOUT_S = {body}
serve.HEADER_TIMEOUT_S = {header}
if sys.argv[1:3] != ["-m", "environments.server"]:
    sys.exit(f"unexpected argv {{sys.argv}}")
sys.argv = ["environments.server", *sys.argv[3:]]
runpy.run_module("environments.server", run_name="__main__", alter_sys=True)
"""


@pytest.fixture
def short_limits(server_factory: Callable[..., Any], tmp_path: Path) -> Any:
    """A real controller server whose header and body timeouts are a couple of seconds."""
    wrapper = tmp_path / "python-short-limits"
    wrapper.write_text(_SHORT_LIMITS.format(python=sys.executable, body=_SHORT_BODY_S, header=_SHORT_HEADER_S))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return server_factory(python=str(wrapper))

_BAD_TIMEOUTS = ["NaN", "Infinity", "-Infinity", "-1", "0", "1e300", '"10"', "true"]


async def test_shell_is_read_as_osworlds_server_reads_it(server: Any, tmp_path: Path) -> None:
    """JSON booleans, and the strings "true" and "false" of OSWorld's task files, which its
    server passes to subprocess as non-empty strings: both run through a shell. Any other
    spelling is refused with one line and runs nothing."""
    marker = tmp_path / "ran"
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers) as http:
        replies = [
            await http.post(path, json={"command": f"touch {marker}", "shell": value})
            for path in ("/execute", "/setup/execute", "/setup/launch", "/execute_with_verification")
            for value in ("0", "True", "", 1, 0, ["x"], {"a": 1})
        ]
        plain = await http.post("/execute", json={"command": ["sh", "-c", "echo plain"], "shell": False})
        shell = await http.post("/execute", json={"command": "echo $((2+3))", "shell": True})
        spelled = [
            await http.post("/execute", json={"command": "echo $((2+3))", "shell": value}) for value in ("true", "false")
        ]
    for reply in replies:
        assert reply.status_code == 400, reply.text
        assert "shell must be true or false" in reply.json()["message"]
    assert not marker.exists()
    assert plain.json()["output"] == "plain\n"
    assert shell.json()["output"] == "5\n"
    assert [r.json()["output"] for r in spelled] == ["5\n", "5\n"]


@pytest.mark.parametrize("bad", _BAD_TIMEOUTS)
async def test_timeouts_must_be_finite_positive_numbers(server: Any, bad: str) -> None:
    bodies = {
        "/execute": '{"command": ["true"], "timeout": %s}',
        "/run_python": '{"code": "print(1)", "timeout": %s}',
        "/run_python_script": '{"code": "print(1)", "timeout": %s}',
        "/run_bash_script": '{"script": "echo 1", "timeout": %s}',
        "/action": '{"code": "pass", "timeout": %s}',
    }
    headers = {**server.headers, "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers) as http:
        for path, body in bodies.items():
            reply = await http.post(path, content=body % bad)
            assert reply.status_code == 400, (path, bad, reply.text)
            assert "timeout must be" in reply.json()["message"], (path, reply.text)


async def test_a_good_timeout_still_applies(server: Any) -> None:
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30) as http:
        reply = await http.post("/run_bash_script", json={"script": "sleep 5", "timeout": 0.5})
    assert reply.status_code == 200 and reply.json()["timed_out"] is True


def _open_half_requests(host: str, port: int, count: int) -> list[socket.socket]:
    socks = []
    for n in range(count):
        s = socket.create_connection((host, port), timeout=5)
        if n % 2:  # half send part of a request line and headers, half nothing at all
            s.sendall(b"GET /screenshot HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        s.setblocking(False)
        socks.append(s)
    return socks


async def test_connections_without_a_whole_request_are_closed(short_limits: Any) -> None:
    """No token, no complete headers: each connection is dropped after the header timeout
    (before the fix they stayed open for aiohttp's 75 s keep-alive)."""
    server = short_limits
    url = urlparse(server.url)
    count = 1000
    socks = await asyncio.to_thread(_open_half_requests, url.hostname or "127.0.0.1", url.port or 80, count)
    started = time.monotonic()
    selector = selectors.DefaultSelector()
    for s in socks:
        selector.register(s, selectors.EVENT_READ)
    closed = 0
    deadline = started + _SHORT_HEADER_S + 20
    try:
        while closed < count and time.monotonic() < deadline:
            for key, _ in await asyncio.to_thread(selector.select, 1.0):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(4096)
                except (ConnectionResetError, BlockingIOError):
                    data = b""
                if not data:
                    selector.unregister(sock)
                    closed += 1
        took = time.monotonic() - started
    finally:
        selector.close()
        for s in socks:
            s.close()
    assert closed == count, f"{count - closed} of {count} half-open connections still open after {took:.0f} s"
    assert took < _SHORT_HEADER_S + 20
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers) as http:
        assert (await http.get("/platform")).status_code == 200  # and the server still answers


def _trickle(host: str, port: int, token: str | None) -> tuple[bytes, float]:
    """Whole headers, then a JSON body that never finishes; returns the reply and its delay."""
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    head = (f"POST /execute HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
            "Content-Length: 400\r\n\r\n").encode()
    with socket.create_connection((host, port), timeout=_SHORT_BODY_S + 30) as s:
        s.sendall(head + b'{"command": ["true"], ')
        started = time.monotonic()
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
            if b"\r\n\r\n" in reply:
                break
        return reply, time.monotonic() - started


async def test_a_body_that_never_arrives_is_a_408(short_limits: Any) -> None:
    server = short_limits
    url = urlparse(server.url)
    reply, took = await asyncio.to_thread(_trickle, url.hostname or "127.0.0.1", url.port or 80, server.token)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    # the short limit fired, not the product's 20 s (so the wrapper's setting took hold)
    assert _SHORT_BODY_S - 1 <= took < min(_SHORT_BODY_S + 15, BODY_TIMEOUT_S - 1)

