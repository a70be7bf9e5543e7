"""The in-desktop controller: an HTTP server speaking OSWorld's in-VM protocol.

Unlike OSWorld's, it binds loopback by default, needs a bearer token, limits body sizes,
keeps one X connection for screenshots, runs actions in a warm pyautogui executor, kills
its children on timeout and on exit, and can run model code in a bubblewrap sandbox.
Run it with ``python -m environments.server``; the application itself is in
`environments.server.app` and the process entry point in `environments.server.serve`
(kept out of this module so the light process helpers import without aiohttp).
"""

from environments.server.config import TOKEN_ENV, ConfigError, ServerConfig, parse_args
from environments.server.processes import Completed, ProcessRegistry, RunAs, kill_group, run_captured

__all__ = [
    "TOKEN_ENV",
    "Completed",
    "ConfigError",
    "ProcessRegistry",
    "RunAs",
    "ServerConfig",
    "kill_group",
    "parse_args",
    "run_captured",
]
