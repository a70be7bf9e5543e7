"""N simulated emulators behind one fake adb server, each with its console, ready to drive."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .adb_server import FakeAdbServer
from .console import FakeEmulatorConsole
from .device import SimulatedDevice

__all__ = ["FakeFleet", "fake_fleet"]


@dataclass
class FakeFleet:
    """What `fake_fleet` started: the adb server, the devices and consoles, the token file."""

    server: FakeAdbServer
    devices: list[SimulatedDevice]
    consoles: list[FakeEmulatorConsole]
    token_path: Path

    @property
    def serials(self) -> list[str]:
        return [d.serial for d in self.devices]


@contextmanager
def fake_fleet(
    size: int,
    token_dir: Path,
    *,
    screen: tuple[int, int] = (720, 1280),
    start_snapshot: str | None = "agent_s3_start",
) -> Iterator[FakeFleet]:
    """Start `size` emulators; serials are ``emulator-<console port>`` as a real emulator's are.

    The console auth token is written to ``token_dir/.emulator_console_auth_token``; with
    `start_snapshot` each device saves its fresh state under that name.
    """
    token = secrets.token_hex(8)
    token_path = Path(token_dir) / ".emulator_console_auth_token"
    token_path.write_text(token)
    consoles: list[FakeEmulatorConsole] = []
    devices: list[SimulatedDevice] = []
    server = FakeAdbServer()
    try:
        for _ in range(size):
            # The console's port is only known once bound; the serial follows from it.
            device = SimulatedDevice("pending", screen)
            console = FakeEmulatorConsole(device, token)
            device.serial = f"emulator-{console.port}"
            console.start()
            consoles.append(console)
            devices.append(device)
            server.add(device)
            if start_snapshot:
                device.snapshot_save(start_snapshot)
        server.start()
        yield FakeFleet(server, devices, consoles, token_path)
    finally:
        server.stop()
        for console in consoles:
            console.stop()
