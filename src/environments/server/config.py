"""The server's settings, its command line, and the safety checks on them."""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from environments.limits import FILE_BYTES
from environments.server.processes import RunAs

__all__ = ["TOKEN_ENV", "ConfigError", "ServerConfig", "child_env", "parse_args"]

#: Environment variable the bearer token may come from (never passed on to children).
TOKEN_ENV = "AGENT_S3_SERVER_TOKEN"


class ConfigError(ValueError):
    """A bad combination of options; the message says what to do."""


@dataclass(frozen=True)
class ServerConfig:
    """Everything the server needs; `token=None` only when `no_auth` is set."""

    host: str = "127.0.0.1"
    port: int = 0
    port_file: Path | None = None
    token: str | None = None
    platform: Literal["ubuntu", "windows"] = "ubuntu"
    run_as: RunAs | None = None
    sandbox: Literal["bwrap", "none"] = "none"
    sandbox_home: Path | None = None
    sandbox_hidden: tuple[str, ...] = ()
    max_body_bytes: int = FILE_BYTES
    no_auth: bool = False
    allow_public: bool = False
    execute_timeout: float = 120.0
    open_file_timeout: float = 1800.0

    def validate(self) -> None:
        if self.no_auth and not self.allow_public and not _is_loopback(self.host):
            raise ConfigError(
                f"--no-auth refuses to bind the non-loopback address {self.host}; "
                "add --allow-public only on a private network you control"
            )
        if not self.no_auth and not self.token:
            raise ConfigError(f"no token: pass --token-file PATH or set {TOKEN_ENV} (or use --no-auth)")
        if self.sandbox == "bwrap" and self.sandbox_home is None:
            raise ConfigError("--sandbox bwrap needs --sandbox-home DIR (the environment's home)")
        if self.run_as is not None and os.geteuid() != 0:
            raise ConfigError("--run-as needs the server to start as root; drop the flag or run as root")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def child_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment for commands the server runs: its own minus the token.

    python-xlib (and so pyautogui) refuses to connect without an Xauthority file, which a
    bare Xvfb does not need; point it at an empty one in that case.
    """
    env = {k: v for k, v in base.items() if k != TOKEN_ENV}
    xauth = env.get("XAUTHORITY") or os.path.join(env.get("HOME", "/"), ".Xauthority")
    if not os.path.exists(xauth):
        env["XAUTHORITY"] = "/dev/null"
    return env


def _read_token(path: str | None, environ: Mapping[str, str]) -> str | None:
    if path:
        try:
            token = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"cannot read --token-file {path}: {exc.strerror}") from exc
        if not token:
            raise ConfigError(f"--token-file {path} is empty; write a random token into it")
        return token
    return environ.get(TOKEN_ENV) or None


def parse_args(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> ServerConfig:
    """Parse the command line into a validated `ServerConfig` (raises `ConfigError`)."""
    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="python -m environments.server",
        description="OSWorld-compatible desktop controller (bearer token, loopback by default).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (see --port-file)")
    parser.add_argument("--port-file", type=Path, help="written atomically with the port once listening")
    parser.add_argument("--token-file", help=f"file holding the bearer token (else ${TOKEN_ENV})")
    parser.add_argument("--platform", choices=["ubuntu", "windows"], default="ubuntu")
    parser.add_argument("--run-as", type=RunAs.parse, metavar="UID[:GID]", help="run children as this user")
    parser.add_argument("--sandbox", choices=["bwrap", "none"], default="none")
    parser.add_argument("--sandbox-home", type=Path, help="the only writable folder inside the sandbox")
    parser.add_argument(
        "--sandbox-hide", action="append", default=[], metavar="DIR",
        help="extra host folder to hide inside the sandbox (repeatable)",
    )  # fmt: skip
    parser.add_argument("--max-body-mb", type=float, default=FILE_BYTES / (1024 * 1024))
    parser.add_argument("--no-auth", action="store_true", help="no token (OSWorld's controller, inside a VM)")
    parser.add_argument(
        "--allow-public", action="store_true", help="with --no-auth: allow a non-loopback bind"
    )
    args = parser.parse_args(argv)
    config = ServerConfig(
        host=args.host,
        port=args.port,
        port_file=args.port_file,
        token=None if args.no_auth else _read_token(args.token_file, environ),
        platform=args.platform,
        run_as=args.run_as,
        sandbox=args.sandbox,
        sandbox_home=args.sandbox_home,
        sandbox_hidden=tuple(args.sandbox_hide),
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        no_auth=args.no_auth,
        allow_public=args.allow_public,
    )
    config.validate()
    return config
