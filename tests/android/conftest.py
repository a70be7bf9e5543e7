"""Fixtures of the Android tests: simulated emulators behind a local adb server, their
consoles, and environments driven through the real `adbutils` client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from environments.android import (
    AdbLink,
    AndroidEnvironment,
    AndroidProvider,
    EmulatorConsole,
    console_port_of,
)
from testing.android import FakeFleet, fake_fleet


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[FakeFleet]:
    """Three simulated emulators, each with its console, behind one adb server."""
    with fake_fleet(3, tmp_path, screen=(540, 960)) as started:
        yield started


@pytest.fixture
def android_env(fleet: FakeFleet) -> AndroidEnvironment:
    """The first emulator as an environment (settle time zeroed for speed)."""
    serial = fleet.serials[0]
    port = console_port_of(serial)
    assert port is not None
    return AndroidEnvironment(
        AdbLink(serial, port=fleet.server.port, timeout=10),
        console=EmulatorConsole(port, token_path=fleet.token_path),
        settle=0,
    )


@pytest.fixture
async def android_pool(fleet: FakeFleet) -> AsyncIterator[AndroidProvider]:
    async with AndroidProvider(3, adb_port=fleet.server.port, token_path=fleet.token_path, settle=0) as pool:
        yield pool
