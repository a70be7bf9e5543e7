"""Suite-wide fixtures: no test reaches beyond loopback, model backoff is zeroed, OSWorld's
getters retry without their 5 s waits, and scripted models do not leak between tests."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from core.llm import Script
from core.llm.profiles import TODAY_ENV
from core.llm.retry import BACKOFF_SCALE_ENV
from environments.tasks.getters import GETTER_RETRY_SCALE_ENV


class NonLoopbackConnection(PermissionError):
    """Raised when a test tries to reach a non-loopback address."""


def _is_local_host(host: Any) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).split("%", 1)[0]
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """Fail any test that connects (or resolves a name) outside loopback; unix sockets pass.

    Yields the list of violations (only the guard's own test clears it)."""
    violations: list[str] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(sock_family: int, address: Any) -> None:
        if sock_family == getattr(socket, "AF_UNIX", object()):
            return
        host = address[0] if isinstance(address, tuple) else address
        if not _is_local_host(host):
            violations.append(f"connect to {address!r}")
            raise NonLoopbackConnection(f"tests may not reach non-loopback address {address!r}")

    def connect(self: socket.socket, address: Any) -> None:
        check(self.family, address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(self.family, address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_local_host(host):
            violations.append(f"resolve {host!r}")
            raise NonLoopbackConnection(f"tests may not resolve non-loopback host {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield violations
    if violations:
        pytest.fail(f"{request.node.nodeid} reached beyond loopback: {'; '.join(violations)}")


@pytest.fixture(autouse=True)
def _zero_model_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries still happen and Retry-After is still honoured, but without exponential waits."""
    monkeypatch.setenv(BACKOFF_SCALE_ENV, "0")


@pytest.fixture(autouse=True)
def _short_getter_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A result file the desktop refuses or lacks is still asked for three times, 0.5 s apart
    instead of 5 s (15 s per refused file in every scoring that meets one)."""
    monkeypatch.setenv(GETTER_RETRY_SCALE_ENV, "0.1")


#: The date the suite measures model shutdowns against (the SDKs' lists and the rules table
#: name dates; a model that shuts down later in the real calendar must not break the suite).
SUITE_TODAY = "2026-11-26"


@pytest.fixture(autouse=True)
def _pinned_model_calendar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TODAY_ENV, SUITE_TODAY)


@pytest.fixture(autouse=True)
def _fresh_scripts() -> Iterator[None]:
    Script.clear_registry()
    yield
    Script.clear_registry()
