"""OSWorld's proxy on a local desktop: a ``proxy: true`` task on a networked desktop gets a relay on
its own ``127.0.0.1:18888`` (tinyproxy's part in OSWorld's VM) to the pool's next proxy, with that
proxy's credentials added on the host, and ``http(s)_proxy`` in the desktop's ``~/.bashrc``
pointing at the relay. The upstream proxy here is a recorder on the host's loopback."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.trajectory import Task
from environments.local import DesktopConfig, LocalDesktop
from environments.local.environment import LocalEnvironment
from environments.local.proxy_relay import ProxyRelay
from environments.local.server_env import desktop_client, server_environment
from environments.local.spawner import run_blocking

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


class _Upstream:
    """An HTTP proxy that records each request head and answers 200."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.heads: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            self.heads.append(data.split(b"\r\n\r\n")[0].decode())
            body = b"via the upstream proxy"
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    server = _Upstream()
    yield server
    server.close()


def _ask(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        out = b""
        while chunk := sock.recv(4096):
            out += chunk
    return out


def test_the_relay_adds_the_credentials_and_nothing_else_reaches_upstream(upstream: _Upstream) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    relay = ProxyRelay("/proc/self/ns/net", ("127.0.0.1", upstream.port), username="u", password="p", port=port)
    try:
        assert "p" not in repr(relay).replace("port", "").replace("upstream", "")
        reply = _ask(port, b"GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n"
                           b"Proxy-Authorization: Basic forged\r\nConnection: keep-alive\r\n\r\n")
        assert reply.endswith(b"via the upstream proxy")
        head = upstream.heads[-1].split("\r\n")
        assert head[0] == "GET http://example.test/ HTTP/1.1"
        auth = [line for line in head if line.lower().startswith("proxy-authorization")]
        assert auth == ["Proxy-Authorization: Basic " + base64.b64encode(b"u:p").decode()]  # the forged one dropped
        assert "Connection: close" in head and "Connection: keep-alive" not in head
    finally:
        relay.close()


def _network_missing() -> str | None:
    lacking = [t for t in ("slirp4netns", "nft", "nsenter", "Xvfb", "bwrap") if shutil.which(t) is None]
    if not Path("/dev/net/tun").exists() or os.geteuid() != 0:
        lacking.append("/dev/net/tun and root")
    return f"networked desktops need {', '.join(lacking)}" if lacking else None


async def test_a_proxy_task_on_a_networked_desktop_gets_osworlds_proxy(
    tmp_path_factory: pytest.TempPathFactory, upstream: _Upstream, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    missing = _network_missing()
    if missing:
        pytest.skip(missing)
    folder = tmp_path_factory.mktemp("proxy")
    pool = folder / "dataimpulse.json"
    pool.write_text(json.dumps([{"host": "127.0.0.1", "port": upstream.port, "username": "pool-user",
                                 "password": "pool-secret"}]))
    monkeypatch.setenv("PROXY_CONFIG_FILE", str(pool))
    desktop = LocalDesktop("proxied", folder, DesktopConfig(snapshot="blank"), pool="tests-proxy")
    await run_blocking(desktop.start)

    async def keep(_: LocalEnvironment) -> None:
        return None

    env = LocalEnvironment(desktop, server_environment(desktop), on_close=keep)
    task = Task.from_osworld({"id": "proxy-task", "instruction": "x", "proxy": True, "config": [],
                              "evaluator": {"func": "infeasible"}})
    try:
        await env.prepare_task(task, folder / "cache")
        assert env.info.network and env.tasks.proxied
        script = ("source ~/.bashrc; python3 -c \"import os, urllib.request; print(os.environ['http_proxy']); "
                  "print(urllib.request.urlopen('http://example.test/', timeout=20).read().decode())\"")
        async with desktop_client(desktop.info()) as client:
            done = await client.execute(["bash", "-c", script], timeout=60)
            bashrc = (await client.execute(["bash", "-c", "cat ~/.bashrc"], timeout=30)).stdout
        assert done.stdout.splitlines() == ["http://127.0.0.1:18888", "via the upstream proxy"], done
        assert "pool-secret" not in bashrc and "export https_proxy=http://127.0.0.1:18888" in bashrc
        head = upstream.heads[-1].split("\r\n")
        assert head[0] == "GET http://example.test/ HTTP/1.1"
        assert "Proxy-Authorization: Basic " + base64.b64encode(b"pool-user:pool-secret").decode() in head
        # A task without the proxy: the relay goes with the revert.
        plain = Task.from_osworld({"id": "plain", "instruction": "x", "config": [], "evaluator": {"func": "infeasible"}})
        await env.prepare_task(plain, folder / "cache")
        assert not env.tasks.proxied
    finally:
        env.tasks.close_proxy()
        await run_blocking(desktop.close)
