"""OSWorld's Chrome steps and getters on a local desktop, through a door into its network namespace.

The task starts the browser with DevTools on 1337 and socat on 9222 as OSWorld's Chrome tasks
do; OSWorld's own `chrome_open_tabs` opens the tabs and its `open_tabs_info` getter reads them
back, both reaching port 9222 on the desktop's own loopback through the host-side door.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from environments.local import DesktopConfig, LocalDesktop
from environments.local.server_env import desktop_client
from environments.tasks import TaskContext, evaluate, parse_task, run_setup

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

_NEEDS = ("Xvfb", "openbox", "dbus-daemon", "chromium", "socat")
URLS = ["data:text/html,<title>one</title>one", "data:text/html,<title>two</title>two"]


@pytest.fixture
async def desktop(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalDesktop]:
    missing = [tool for tool in _NEEDS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (AGENT_S3_OSWORLD_APPS=1 bash scripts/setup.sh)")
    found = LocalDesktop(
        "tasks-chrome", tmp_path_factory.mktemp("chrome-envs"), DesktopConfig(), pool="tests-chrome"
    )
    try:
        found.start()
        yield found
    finally:
        found.close()


#: Prints "ready" once the browser has its first tab (polled by OSWorld's `until`, which
#: repeats the command with no pause of its own).
_FIRST_TAB = (
    "import json, time, urllib.request\n"
    "time.sleep(0.3)\n"
    "try:\n"
    "    pages = json.load(urllib.request.urlopen('http://127.0.0.1:1337/json/list', timeout=2))\n"
    "except OSError:\n"
    "    pages = []\n"
    "print('ready' if any(p.get('type') == 'page' for p in pages) else 'waiting')\n"
)


def _task(expected: list[str]) -> dict[str, Any]:
    return {
        "id": "chrome-tabs",
        "instruction": "nothing",
        "config": [
            {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
            {
                "type": "launch",
                "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]},
            },
            # OSWorld's step closes "the default tab" right after opening the first URL; on a
            # busy machine the browser's first tab may not exist yet, and the step then closes
            # its own first tab. OSWorld's VMs give the browser time; this waits for it.
            {"type": "execute", "parameters": {"command": ["python3", "-c", _FIRST_TAB], "until": {"stdout": "ready"}}},
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": URLS}},
        ],
        "evaluator": {
            "func": "is_expected_tabs",
            "result": {"type": "open_tabs_info"},
            "expected": {"type": "rule", "rules": {"type": "url", "urls": expected}},
        },
    }


async def test_chrome_tabs_open_and_are_read_back_through_the_devtools_door(
    desktop: LocalDesktop, tmp_path: Path
) -> None:
    task = parse_task(_task(URLS), "chrome.json")
    ctx = TaskContext(task=task, cache_dir=tmp_path / "cache")
    client = desktop_client(desktop.info())
    await client.wait_ready()
    try:
        await run_setup(client, ctx)
        assert await evaluate(client, ctx) == 1.0
        wrong = TaskContext(task=parse_task(_task(URLS[:1]), "chrome.json"), cache_dir=tmp_path / "cache2")
        assert await evaluate(client, wrong) == 0.0
    finally:
        await client.aclose()
