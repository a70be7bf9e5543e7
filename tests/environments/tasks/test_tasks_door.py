"""Where OSWorld's controllers reach a desktop: a VM's own URL, a token-stamping door, or a
door over any task client, each open only while setup or scoring runs."""

from __future__ import annotations

import asyncio
import http.server
import threading
from typing import Any

import pytest
import requests

from environments.osworld import OSWorldClient
from environments.tasks.door import NO_BROWSER, DoorRoute, reach


async def test_a_vm_without_auth_is_reached_through_bounded_doors_to_its_ports() -> None:
    async with OSWorldClient("http://10.0.3.7:5000") as client:
        assert client.door_route() == DoorRoute(("10.0.3.7", 5000), None, direct=True)
        async with reach(client) as endpoint:
            # OSWorld's controllers and getters speak to doors on this host: the server's,
            # and the VM's DevTools and VLC ports, never to an address the VM may name.
            assert endpoint.host == "127.0.0.1" and endpoint.browser_unreachable is None
            assert len({endpoint.port, endpoint.chromium_port, endpoint.vlc_port}) == 3
            assert 9222 not in (endpoint.port, endpoint.chromium_port) and endpoint.refusals() == []


class _VM(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"output": null, "status": "success"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        return None


async def test_a_server_whose_address_changes_is_reached_at_its_current_url() -> None:
    vm = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _VM)
    threading.Thread(target=vm.serve_forever, daemon=True).start()
    current = {"url": "http://10.0.0.1:5000"}
    try:
        async with OSWorldClient("http://vm-1", door_url=lambda: current["url"]) as client:
            assert client.door_route().upstream == ("10.0.0.1", 5000)
            current["url"] = f"http://127.0.0.1:{vm.server_address[1]}"  # relaunched, reached through connect_via
            async with reach(client) as endpoint:
                reply = await asyncio.to_thread(requests.get, f"{endpoint.url}/terminal", timeout=10)
    finally:
        vm.shutdown()
        vm.server_close()
    assert reply.json() == {"output": None, "status": "success"} and reply.headers["connection"] == "close"


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
