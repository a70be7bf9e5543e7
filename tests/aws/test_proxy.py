"""OSWorld's proxy for tasks marked ``proxy: true``, configured as OSWorld configures it: its pool
file, its own ``_proxy_setup`` run through the door, Chrome launched with its --proxy-server,
getters told ``current_use_proxy``, and the pool's credentials in no log line.

``_proxy_setup`` installs tinyproxy with ``sudo apt-get`` in the VM, so it is never pointed at
a server that runs commands on this machine: the VM's controller server is a recorder that
answers OSWorld's ``/terminal``, ``/setup/execute`` and ``/setup/launch`` in the shapes the
project's own server does (tests/environments/server/test_server_osworld_endpoints.py holds
those against OSWorld's controller) and runs nothing."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from core.trajectory import Task
from environments.osworld.proxy import plan_proxy, start_proxy, wants_proxy
from environments.tasks.door import Endpoint
from environments.tasks.handling import set_up_with

POOL = [{"host": "203.0.113.7", "port": 8000, "username": "pool-user-1", "password": "pool-secret-1"},
        {"host": "203.0.113.8", "port": 8001, "username": "pool-user-2", "password": "pool-secret-2"}]
PASSWORD = "osworld-public-evaluation"


class _Recorder(BaseHTTPRequestHandler):
    calls: list[tuple[str, Any]]

    def log_message(self, *_: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.calls.append(("GET", self.path))
        if self.path == "/terminal":
            self._reply(200, json.dumps({"output": None}).encode(), "application/json")
        else:
            self._reply(404, b"not found", "text/plain")

    def do_POST(self) -> None:
        data = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.calls.append((self.path, data))
        if self.path == "/setup/execute":
            reply = {"status": "success", "output": "", "error": "", "returncode": 0, "exited_ok": True}
            self._reply(200, json.dumps(reply).encode(), "application/json")
        elif self.path == "/setup/launch":
            self._reply(200, f"{data.get('command')} launched successfully".encode(), "text/plain")
        else:
            self._reply(404, b"not found", "text/plain")


@pytest.fixture
def vm() -> Iterator[tuple[Endpoint, list[tuple[str, Any]]]]:
    calls: list[tuple[str, Any]] = []
    handler = type("Handler", (_Recorder,), {"calls": calls})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Endpoint("127.0.0.1", server.server_address[1]), calls
    finally:
        server.shutdown()
        server.server_close()


def _task(tmp_path: Path) -> Task:
    return Task.from_osworld({
        "id": "proxy-task", "instruction": "x", "proxy": True,
        "config": [{"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}}],
        "evaluator": {"func": "infeasible"},
    }, source_path=str(tmp_path / "examples" / "chrome" / "proxy-task.json"))


def test_the_plan_follows_osworlds_pool_file(tmp_path: Path) -> None:
    pool = tmp_path / "dataimpulse.json"
    assert not plan_proxy("auto", str(pool)).enabled  # no file: off, as OSWorld without enable_proxy
    assert "tasks marked proxy: true run without it" in str(plan_proxy("auto", str(pool)).note)
    with pytest.raises(ValueError, match="proxy: on needs OSWorld's proxy pool file"):
        plan_proxy("on", str(pool))
    pool.write_text("[{\"host\": 1}]")
    with pytest.raises(ValueError, match="entry 0 needs a host and a port"):
        plan_proxy("auto", str(pool))  # where OSWorld's pool would log and stay empty
    pool.write_text(json.dumps(POOL))
    plan = plan_proxy("auto", str(pool))
    assert plan.enabled and plan.proxies == 2 and "pool-secret-2" in plan.secrets
    assert not plan_proxy("off", str(pool)).enabled


async def test_a_proxy_task_gets_osworlds_proxy_set_up_and_chrome_behind_it(
    tmp_path: Path, vm: tuple[Endpoint, list[tuple[str, Any]]], caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    endpoint, calls = vm
    pool = tmp_path / "dataimpulse.json"
    pool.write_text(json.dumps(POOL))
    plan = plan_proxy("auto", str(pool))
    task = _task(tmp_path)
    assert wants_proxy(task)
    await start_proxy(endpoint, plan, PASSWORD, task_id=task.id)
    await set_up_with(endpoint, task, tmp_path / "cache", password=PASSWORD, use_proxy=True)
    commands = [" ".join(d["command"]) if isinstance(d["command"], list) else d["command"]
                for path, d in calls if path == "/setup/execute"]
    # OSWorld's own commands, with the pool's first proxy as tinyproxy's upstream and the shell's proxy.
    assert any("Port 18888" in c for c in commands)
    assert any("Upstream http pool-user-1:pool-secret-1@203.0.113.7:8000" in c for c in commands)
    assert any("export http_proxy=http://pool-user-1:pool-secret-1@203.0.113.7:8000" in c for c in commands)
    launches = [d["command"] for path, d in calls if path == "/setup/launch"]
    assert ["tinyproxy -c /tmp/tinyproxy.conf -d"] in launches
    # The task's Chrome is launched behind the local proxy, as OSWorld launches it with use_proxy.
    assert ["google-chrome", "--remote-debugging-port=1337", "--proxy-server=http://127.0.0.1:18888"] in launches
    # The next proxy task gets the pool's next proxy (OSWorld's round robin).
    calls.clear()
    await start_proxy(endpoint, plan, PASSWORD, task_id=task.id)
    assert any("pool-user-2:pool-secret-2@203.0.113.8:8001" in str(d) for _, d in calls)
    # OSWorld logs each command whole; none of the secrets reached a log record.
    for secret in ("pool-secret-1", "pool-secret-2", "pool-user-1", PASSWORD):
        assert secret not in caplog.text, secret
    assert "Upstream http ***:***@203.0.113.7:8000" in caplog.text  # what was logged, redacted


async def test_without_the_proxy_chrome_is_launched_plainly(
    tmp_path: Path, vm: tuple[Endpoint, list[tuple[str, Any]]],
) -> None:  # fmt: skip
    endpoint, calls = vm
    await set_up_with(endpoint, _task(tmp_path), tmp_path / "cache", password=PASSWORD)
    launches = [d["command"] for path, d in calls if path == "/setup/launch"]
    assert launches == [["google-chrome", "--remote-debugging-port=1337"]]
