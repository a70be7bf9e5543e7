"""The suite-wide guard refuses non-loopback connections and allows loopback ones."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest


def test_public_address_is_refused(_loopback_only: list[str]) -> None:
    with pytest.raises(PermissionError, match="non-loopback"):
        socket.create_connection(("93.184.216.34", 80), timeout=1)
    with pytest.raises(PermissionError, match="non-loopback"):
        socket.getaddrinfo("api.openai.com", 443)
    assert len(_loopback_only) == 2
    _loopback_only.clear()


async def test_sdk_style_client_to_public_host_is_refused(_loopback_only: list[str]) -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(Exception, match="non-loopback"):
            await client.get("https://api.anthropic.com/v1/messages")
    assert _loopback_only
    _loopback_only.clear()


def test_loopback_and_unix_sockets_are_allowed(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    with socket.create_connection(server.getsockname(), timeout=1):
        pass
    server.close()
    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)
    client.close()
    listener.close()


async def test_asyncio_connection_to_public_ip_is_refused(_loopback_only: list[str]) -> None:
    with pytest.raises(PermissionError, match="non-loopback"):
        await asyncio.open_connection("1.1.1.1", 443)
    assert _loopback_only
    _loopback_only.clear()
