"""The in-desktop controller: an HTTP server speaking OSWorld's in-VM protocol.

Unlike OSWorld's, it binds loopback by default, needs a bearer token, limits body sizes,
keeps one X connection for screenshots, runs actions in a warm pyautogui executor, kills
its children on timeout and on exit, and can run model code in a bubblewrap sandbox.
"""

from environments.server.app import build_app
from environments.server.config import TOKEN_ENV, ConfigError, ServerConfig, parse_args
from environments.server.executor import WarmExecutor
from environments.server.processes import Completed, ProcessRegistry, RunAs, run_captured
from environments.server.serve import main, serve, write_port_file

__all__ = [
    "TOKEN_ENV",
    "Completed",
    "ConfigError",
    "ProcessRegistry",
    "RunAs",
    "ServerConfig",
    "WarmExecutor",
    "build_app",
    "main",
    "parse_args",
    "run_captured",
    "serve",
    "write_port_file",
]
