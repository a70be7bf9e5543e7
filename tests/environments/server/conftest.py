"""Real Xvfb displays and real controller servers (as subprocesses) for the server tests."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from environments.osworld import OSWorldClient


@dataclass
class Display:
    name: str
    width: int
    height: int
    proc: subprocess.Popen[bytes]


@dataclass
class Server:
    url: str
    token: str | None
    proc: subprocess.Popen[bytes]
    log: Path

    def client(self, **kwargs: object) -> OSWorldClient:
        return OSWorldClient(self.url, self.token, **kwargs)  # type: ignore[arg-type]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def start_xvfb(width: int, height: int) -> Display:
    """Xvfb picks a free display number itself and reports it on a pipe (-displayfd)."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp"],
        pass_fds=[write_fd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        number = pipe.readline().strip().decode()
    if not number:
        proc.kill()
        raise RuntimeError("Xvfb did not start; install xvfb")
    return Display(f":{number}", width, height, proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start_server(
    display: Display,
    folder: Path,
    *args: str,
    token: str | None = "auto",
    env: dict[str, str] | None = None,
    python: str = sys.executable,
) -> Server:
    """`python -m environments.server` on a free port; waits for the port file."""
    folder.mkdir(parents=True, exist_ok=True)
    port_file = folder / "port"
    argv = [python, "-m", "environments.server", "--port", "0", "--port-file", str(port_file), *args]
    if token == "auto":
        token = secrets.token_urlsafe(24)
    if token is not None:
        token_file = folder / "token"
        token_file.write_text(token)
        argv += ["--token-file", str(token_file)]
    child_env = {**os.environ, **(env or {}), "DISPLAY": display.name}
    log = folder / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            argv, env=child_env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}")
        time.sleep(0.02)
    return Server(f"http://127.0.0.1:{port_file.read_text().strip()}", token, proc, log)


def processes_matching(marker: str) -> list[int]:
    """Pids whose command line contains `marker` (read from /proc, no shell tools)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = (
                Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture(scope="session")
def display() -> Iterator[Display]:
    shown = start_xvfb(1280, 720)
    yield shown
    stop(shown.proc)


@pytest.fixture(scope="module")
def server(display: Display, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = start_server(display, tmp_path_factory.mktemp("server"))
    yield started
    stop(started.proc)


@pytest.fixture
def server_factory(display: Display, tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start extra servers (own options) for one test; all are stopped afterwards."""
    started: list[Server] = []

    def make(
        *args: str,
        token: str | None = "auto",
        env: dict[str, str] | None = None,
        on: Display | None = None,
        python: str = sys.executable,
    ) -> Server:
        folder = tmp_path / f"server{len(started)}"
        one = start_server(on or display, folder, *args, token=token, env=env, python=python)
        started.append(one)
        return one

    yield make
    for one in started:
        stop(one.proc)


@pytest.fixture
def find_processes() -> Callable[[str], list[int]]:
    return processes_matching


@pytest.fixture
def display_factory() -> Iterator[Callable[[int, int], Display]]:
    """Extra displays of a given size for one test."""
    started: list[Display] = []

    def make(width: int, height: int) -> Display:
        one = start_xvfb(width, height)
        started.append(one)
        return one

    yield make
    for one in started:
        stop(one.proc)


class LossyProxy:
    """A loopback HTTP/1.1 forwarder that can lose replies or hide endpoints (404).

    `drop_replies` replies are swallowed *after* the server has handled the request (the
    client sees the connection close), which is exactly a lost reply.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.drop_replies = 0
        self.hidden: set[str] = set()
        self.forwarded: list[str] = []
        self.port = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> LossyProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @staticmethod
    async def _message(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        return head, await reader.readexactly(length)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head, body = await self._message(reader)
                path = head.split(b" ", 2)[1].decode()
                if path in self.hidden:
                    writer.write(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"
                    )
                    await writer.drain()
                    continue
                self.forwarded.append(path)
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
                up_writer.write(head + body)
                await up_writer.drain()
                reply_head, reply_body = await self._message(up_reader)
                up_writer.close()
                if self.drop_replies > 0:
                    self.drop_replies -= 1
                    return
                writer.write(reply_head + reply_body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


@pytest.fixture
async def proxy(server: Server) -> AsyncIterator[LossyProxy]:
    """A lossy proxy in front of the module's server."""
    started = await LossyProxy(int(server.url.rsplit(":", 1)[1])).start()
    yield started
    await started.close()
