"""Where OSWorld's controllers reach a desktop: a VM's own URL, a token-stamping door, or a
door over any task client, each open only while setup or scoring runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import requests

from environments.osworld import OSWorldClient
from environments.tasks.door import NO_BROWSER, DoorRoute, Endpoint, reach


async def test_a_vm_without_auth_is_reached_on_its_own_url() -> None:
    async with OSWorldClient("http://10.0.3.7:5000") as client:
        assert client.door_route() == DoorRoute(("10.0.3.7", 5000), None, direct=True)
        async with reach(client) as endpoint:
            assert endpoint == Endpoint("10.0.3.7", 5000)
            assert endpoint.browser_unreachable is None  # its DevTools port answers on the same host


async def test_a_server_whose_address_changes_is_reached_at_its_current_url() -> None:
    current = {"url": "http://10.0.0.1:5000"}
    async with OSWorldClient("http://vm-1", door_url=lambda: current["url"]) as client:
        assert client.door_route().upstream == ("10.0.0.1", 5000)
        current["url"] = "http://127.0.0.1:41213"  # relaunched, reached through connect_via
        async with reach(client) as endpoint:
            assert endpoint == Endpoint("127.0.0.1", 41213)


async def test_a_server_with_a_token_gets_a_stamping_door_closed_afterwards(tmp_path: Any) -> None:
    async with OSWorldClient("http://desktop", token="t0k", uds=str(tmp_path / "ctl.sock")) as client:
        assert client.door_route() == DoorRoute(str(tmp_path / "ctl.sock"), "t0k")
        async with reach(client) as endpoint:
            assert endpoint.host == "127.0.0.1" and endpoint.browser_unreachable == NO_BROWSER
            port = endpoint.port
        with pytest.raises(requests.ConnectionError):
            await asyncio.to_thread(requests.get, f"http://127.0.0.1:{port}/terminal", timeout=5)


async def test_a_client_door_answers_osworlds_shapes(shell_client: Any) -> None:
    (shell_client.home / "f.txt").write_text("data")
    async with reach(shell_client) as endpoint:
        url = endpoint.url

        def calls() -> list[Any]:
            return [
                requests.get(f"{url}/terminal", timeout=10).json(),
                requests.post(f"{url}/execute", json={"command": "exit 3", "shell": True}, timeout=10).json(),
                requests.post(
                    f"{url}/execute", json={"command": ["no-such-program-4711"]}, timeout=10
                ).status_code,
                requests.post(f"{url}/file", data={"file_path": "~/f.txt"}, timeout=10).content,
                requests.post(f"{url}/file", data={"file_path": "~/none"}, timeout=10).status_code,
                requests.post(f"{url}/screen_size", timeout=10).json(),
                requests.post(f"{url}/no_such_endpoint", timeout=10).status_code,
            ]

        got = await asyncio.to_thread(calls)
    assert got == [
        {"output": None, "status": "success"},
        {"status": "success", "output": "", "error": "", "returncode": 3},
        500,
        b"data",
        404,
        {"width": 1920, "height": 1080},
        404,
    ]
