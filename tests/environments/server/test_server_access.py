"""Who may talk to the server: bearer token, body limit, and the no-auth public-bind guard."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.protocols import EnvError, EnvironmentLost
from environments.osworld import OSWorldClient
from environments.server.config import ConfigError, parse_args

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


async def test_requests_without_the_token_get_401(server: Any) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        missing = await http.get("/platform")
        wrong = await http.get("/platform", headers={"Authorization": "Bearer not-the-token"})
        execute = await http.post("/execute", json={"command": ["true"]})
        right = await http.get("/platform", headers=server.headers)
    assert missing.status_code == 401
    assert wrong.status_code == 401
    assert execute.status_code == 401
    assert right.status_code == 200 and right.text == "Linux"


async def test_oversized_upload_gets_413_and_leaves_no_file(
    server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    small = server_factory("--max-body-mb", "1")
    (tmp_path / "up").mkdir()
    target = tmp_path / "up" / "big.bin"
    async with httpx.AsyncClient(base_url=small.url, headers=small.headers) as http:
        too_big = await http.post(
            "/setup/upload",
            data={"file_path": str(target)},
            files={"file_data": ("f", os.urandom(2 * 1024 * 1024))},
        )
        fits = await http.post(
            "/setup/upload", data={"file_path": str(target)}, files={"file_data": ("f", b"x" * 1000)}
        )
    assert too_big.status_code == 413
    assert fits.status_code == 200 and fits.text == "File Uploaded: 1000 bytes"
    assert target.read_bytes() == b"x" * 1000
    assert os.listdir(tmp_path / "up") == ["big.bin"]


def test_no_auth_refuses_a_public_bind(display: Any, tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    result = subprocess.run(
        [sys.executable, "-m", "environments.server", "--no-auth", "--host", "0.0.0.0", "--port", "0",
         "--port-file", str(port_file)],
        env={**os.environ, "DISPLAY": display.name},
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--allow-public" in result.stderr
    assert not port_file.exists()


def test_config_rules() -> None:
    with pytest.raises(ConfigError, match="no token"):
        parse_args([], environ={})
    assert parse_args([], environ={"AGENT_S3_SERVER_TOKEN": "t"}).token == "t"
    assert parse_args(["--no-auth"], environ={}).token is None
    assert parse_args(["--no-auth", "--host", "::1"], environ={}).host == "::1"
    public = parse_args(["--no-auth", "--allow-public", "--host", "0.0.0.0"], environ={})
    assert public.allow_public
    with pytest.raises(ConfigError, match="sandbox-home"):
        parse_args(["--sandbox", "bwrap"], environ={"AGENT_S3_SERVER_TOKEN": "t"})


async def test_no_auth_on_loopback_serves_osworld_clients(server_factory: Callable[..., Any]) -> None:
    open_server = server_factory("--no-auth", token=None)
    async with httpx.AsyncClient(base_url=open_server.url) as http:
        ready = await http.get("/terminal")
        size = await http.post("/screen_size")
    assert ready.json() == {"output": None, "status": "success"}
    assert size.json() == {"width": 1280, "height": 720}


async def test_chunked_upload_over_the_limit_gets_413(
    server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """Without a Content-Length the limit is enforced while streaming; no partial file stays."""
    small = server_factory("--max-body-mb", "1")
    target = tmp_path / "up" / "chunked.bin"
    boundary = "agent-s3-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file_path"\r\n\r\n{target}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file_data"; filename="f"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()

    async def body() -> Any:
        yield head
        for _ in range(32):
            yield b"y" * 65536
        yield f"\r\n--{boundary}--\r\n".encode()

    async with httpx.AsyncClient(base_url=small.url, headers=small.headers) as http:
        reply = await http.post(
            "/setup/upload",
            content=body(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
    assert reply.status_code == 413
    assert os.listdir(target.parent) == []


def test_refuses_to_start_without_a_reachable_display(tmp_path: Path) -> None:
    number = next(n for n in range(4000, 5000) if not os.path.exists(f"/tmp/.X11-unix/X{n}"))
    result = subprocess.run(
        [sys.executable, "-m", "environments.server", "--port-file", str(tmp_path / "port")],
        env={**os.environ, "DISPLAY": f":{number}", "AGENT_S3_SERVER_TOKEN": "t"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert f"cannot open display :{number}" in result.stderr
    assert not (tmp_path / "port").exists()


async def test_client_with_a_wrong_token_gets_one_clear_error(server: Any) -> None:
    async with OSWorldClient(server.url, "wrong-token", retries=0) as client:
        with pytest.raises(EnvError, match="refused the token") as caught:
            await client.screenshot()
    assert not isinstance(caught.value, EnvironmentLost)
