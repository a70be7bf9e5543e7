"""A client of the Android emulator console (TCP, ``localhost:<console port>``).

The emulator writes a banner ending in ``OK``; ``auth <token>`` with the content of
``~/.emulator_console_auth_token`` unlocks it; each command's reply ends with a line ``OK``
or ``KO: <reason>``. Used for VM snapshots (``avd snapshot save|load NAME``). The token is
read from its file at connect time and never logged.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from core.protocols import EnvError, EnvironmentLost

__all__ = ["ConsoleError", "EmulatorConsole", "default_token_path"]

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


class ConsoleError(EnvError):
    """The console refused a command (its ``KO:`` reason is the message)."""


def default_token_path() -> Path:
    return Path.home() / ".emulator_console_auth_token"


class EmulatorConsole:
    """One short session per call: connect, authenticate, run commands, quit."""

    def __init__(
        self, port: int, *, host: str = "127.0.0.1", token_path: Path | None = None, timeout: float = 60.0
    ) -> None:
        self.host = host
        self.port = port
        self.token_path = token_path or default_token_path()
        self.timeout = timeout

    async def _reply(self, reader: asyncio.StreamReader) -> list[str]:
        lines: list[str] = []
        while True:
            raw = await reader.readline()
            if not raw:
                raise EnvironmentLost(f"the emulator console on port {self.port} closed the connection")
            line = raw.decode(errors="replace").rstrip("\r\n")
            if line == "OK" or line.startswith("OK:"):
                return lines
            if line.startswith("KO"):
                raise ConsoleError(f"emulator console on port {self.port}: {line[3:].strip() or 'refused'}")
            lines.append(line)

    async def run(self, *commands: str) -> list[list[str]]:
        """Run `commands` in one authenticated session; the output lines of each."""
        try:
            token = self.token_path.read_text().strip()
        except OSError:
            raise EnvError(
                f"cannot read the emulator console token {self.token_path}; start the emulator once to create it"
            ) from None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 10)
        except (OSError, TimeoutError) as exc:
            raise EnvironmentLost(f"no emulator console at {self.host}:{self.port}: {exc}") from None
        try:
            async with asyncio.timeout(self.timeout):
                await self._reply(reader)
                writer.write(f"auth {token}\r\n".encode())
                await writer.drain()
                await self._reply(reader)
                out = []
                for command in commands:
                    writer.write(f"{command}\r\n".encode())
                    await writer.drain()
                    out.append(await self._reply(reader))
                writer.write(b"quit\r\n")
                await writer.drain()
                return out
        except TimeoutError:
            raise EnvironmentLost(
                f"the emulator console on port {self.port} did not answer in time"
            ) from None
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass

    async def snapshot_save(self, name: str) -> None:
        await self.run(f"avd snapshot save {_checked(name)}")

    async def snapshot_load(self, name: str) -> None:
        await self.run(f"avd snapshot load {_checked(name)}")


def _checked(name: str) -> str:
    if not _NAME.match(name):
        raise EnvError(f"snapshot name {name!r} must be letters, digits, '.', '_' or '-'")
    return name
