"""Android emulators and devices over adb: environments, a pool, snapshots, task endpoints.

Actions arrive as JSON op lists (`ops`), compiled by `agent_s3.compile_android`; the
simulated phone and local adb server for tests live in `testing.android`.
"""

from .adb import AdbLink, list_devices
from .apps import resolve_app
from .console import ConsoleError, EmulatorConsole, default_token_path
from .environment import AndroidEnvironment, console_port_of, physical_device_error
from .ops import KEYCODES, OpError, input_text_argvs, parse_ops, shell_line
from .provider import AndroidProvider
from .taskclient import AdbTaskClient

__all__ = [
    "KEYCODES",
    "AdbLink",
    "AdbTaskClient",
    "AndroidEnvironment",
    "AndroidProvider",
    "ConsoleError",
    "EmulatorConsole",
    "OpError",
    "console_port_of",
    "default_token_path",
    "input_text_argvs",
    "list_devices",
    "parse_ops",
    "physical_device_error",
    "resolve_app",
    "shell_line",
]
