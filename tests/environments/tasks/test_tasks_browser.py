"""chrome_open_tabs through OSWorld's own setup controller against a real Chromium's DevTools,
and the one-line refusal where a door cannot reach the browser."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from environments.tasks import UnsupportedStep, run_setup
from environments.tasks.door import ClientDoor, Endpoint

pytestmark = [pytest.mark.integration]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tabs(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as reply:
        return [t["url"] for t in json.loads(reply.read()) if t.get("type") == "page"]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[int]:
    """Chromium (headless, no display needed) answering DevTools on a free port."""
    program = shutil.which("chromium") or shutil.which("google-chrome")
    if program is None or importlib.util.find_spec("playwright") is None:
        pytest.skip("needs chromium (AGENT_S3_OSWORLD_APPS=1 scripts/setup.sh) and the [osworld-setup] extra")
    port = _free_port()
    proc = subprocess.Popen(
        [program, "--headless=new", "--no-sandbox", f"--remote-debugging-port={port}",
         f"--user-data-dir={tmp_path / 'profile'}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _tabs(port)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("chromium did not answer DevTools")
                time.sleep(0.2)
        yield port
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def pages(tmp_path: Path) -> Iterator[str]:
    folder = tmp_path / "site"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.html").write_text(f"<title>{name}</title><p>page {name}</p>")
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
    )
    assert server.stdout is not None
    port = int(server.stdout.readline().split(" port ")[1].split()[0])
    yield f"http://127.0.0.1:{port}"
    server.kill()
    server.wait()


async def test_chrome_open_tabs_opens_each_url(
    browser: int, pages: str, make_ctx: Any, shell_client: Any
) -> None:
    urls = [f"{pages}/a.html", f"{pages}/b.html"]
    ctx = make_ctx({"config": [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": urls}}]})
    door = ClientDoor(shell_client)  # the controller server; the browser answers on the same host
    await door.start()
    try:
        await run_setup(Endpoint("127.0.0.1", door.port, chromium_port=browser), ctx)
    finally:
        await door.close()
    tabs = await asyncio.to_thread(_tabs, browser)
    assert sorted(tabs) == sorted(urls)  # the blank start tab was closed, as OSWorld does


async def test_chrome_open_tabs_through_a_door_without_the_browser_fails_with_one_line(
    make_ctx: Any, shell_client: Any
) -> None:
    ctx = make_ctx(
        {"id": "tabs", "config": [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["http://x"]}}]}
    )
    with pytest.raises(
        UnsupportedStep, match=r"task tabs: setup step type 'chrome_open_tabs' .*DevTools port"
    ):
        await run_setup(shell_client, ctx)
    assert shell_client.calls == []
