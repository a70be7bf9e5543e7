"""OSWorld's controller behind the getters: a result file the desktop refuses is asked for
three times, as OSWorld asks; AGENT_S3_GETTER_RETRY_SCALE only shortens the waits between."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from core.trajectory import Task
from environments.tasks.context import TaskContext
from environments.tasks.door import Endpoint
from environments.tasks.getters import GETTER_RETRY_SCALE_ENV, official_env
from environments.tasks.official import getter

pytest.importorskip("desktop_env.controllers.python", reason="needs desktop-env (scripts/setup.sh)")


@pytest.fixture
def refusing() -> Iterator[tuple[int, list[str]]]:
    """A controller server that answers every /file with 404, recording what was asked."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            asked.append(self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], asked
    finally:
        server.shutdown()
        server.server_close()


def _env(port: int, tmp_path: Path):  # type: ignore[no-untyped-def]
    task = Task.from_osworld({"id": "retries", "instruction": "-", "evaluator": {"func": "infeasible"}})
    ctx = TaskContext(task=task, cache_dir=tmp_path)
    return official_env(Endpoint("127.0.0.1", port), ctx)


def test_a_refused_file_is_asked_for_three_times_with_scaled_waits(
    refusing: tuple[int, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, asked = refusing
    monkeypatch.setenv(GETTER_RETRY_SCALE_ENV, "0.02")
    env = _env(port, tmp_path)
    assert env.controller.retry_times == 3 and env.controller.retry_interval == pytest.approx(0.1)
    began = time.monotonic()
    got = getter("vm_file").fn(env, {"path": "/etc/shadow", "dest": "shadow"})
    assert got is None and asked == ["/file"] * 3  # OSWorld's three attempts, none answered
    assert time.monotonic() - began >= 0.3  # the waits are shortened, not skipped
    assert not (tmp_path / "shadow").exists()


def test_without_the_setting_the_waits_are_osworlds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GETTER_RETRY_SCALE_ENV)
    assert _env(1, tmp_path).controller.retry_interval == 5
    monkeypatch.setenv(GETTER_RETRY_SCALE_ENV, "not a number")  # refused in one line, never read as 1
    with pytest.raises(ValueError, match="AGENT_S3_GETTER_RETRY_SCALE='not a number' is not a number >= 0"):
        _env(1, tmp_path)
