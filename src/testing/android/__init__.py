"""A simulated phone, a local adb server and an emulator console for it.

For tests, benchmarks and demos where no Android emulator can run: the real adb client
(`adbutils`) talks to `FakeAdbServer` over loopback TCP exactly as it would to adb's server,
and the environment's revert talks to `FakeEmulatorConsole` as it would to an emulator.
`fake_fleet` starts N of them with emulator serials that name their console ports.
"""

from .adb_server import FEATURES, FakeAdbServer
from .console import FakeEmulatorConsole
from .device import LAUNCHER, NOTES, NOTES_FILE, SETTINGS, SimulatedDevice
from .fleet import FakeFleet, fake_fleet
from .shell import KEYCODES, ShellOutput, run_shell

__all__ = [
    "FEATURES",
    "KEYCODES",
    "LAUNCHER",
    "NOTES",
    "NOTES_FILE",
    "SETTINGS",
    "FakeAdbServer",
    "FakeEmulatorConsole",
    "FakeFleet",
    "ShellOutput",
    "SimulatedDevice",
    "fake_fleet",
    "run_shell",
]
