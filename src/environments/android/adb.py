"""One device seen through the adb server with the `adbutils` client, in worker threads.

`adbutils` is synchronous, so every call runs in a thread. Commands go through the
``shell,v2`` service (stdout, stderr and the exit status come back separately); binary
output (the screenshot) through ``exec:``, which passes bytes unmodified. A refused
connection, an unknown or offline device and a dropped stream are `EnvironmentLost`; a
command that runs and exits non-zero is an ordinary `ExecResult`.
"""

from __future__ import annotations

import asyncio
import socket

import adbutils  # type: ignore[import-untyped]
from adbutils.errors import AdbError, AdbTimeout  # type: ignore[import-untyped]

from core.protocols import EnvironmentLost, ExecResult

__all__ = ["AdbLink", "list_devices"]


def _reachable(host: str, port: int) -> None:
    """Fail fast (and never let the client start a real adb server) when nothing listens."""
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError as exc:
        raise EnvironmentLost(
            f"no adb server at {host}:{port} ({exc.strerror or exc}); start one with `adb start-server`"
        ) from None


def _lost(serial: str, exc: BaseException) -> EnvironmentLost:
    return EnvironmentLost(f"android device {serial} is unreachable through adb: {exc}")


def list_devices(host: str, port: int) -> list[tuple[str, str]]:
    """(serial, state) of every device the adb server knows (blocking)."""
    _reachable(host, port)
    client = adbutils.AdbClient(host=host, port=port, socket_timeout=10)
    try:
        return [(info.serial, info.state) for info in client.list(extended=True)]
    except (AdbError, OSError, EOFError) as exc:
        raise EnvironmentLost(f"the adb server at {host}:{port} failed to list devices: {exc}") from exc


class AdbLink:
    """Commands and screenshots of the device `serial` through the adb server at host:port."""

    def __init__(
        self, serial: str, *, host: str = "127.0.0.1", port: int = 5037, timeout: float = 30.0
    ) -> None:
        self.serial = serial
        self.host = host
        self.port = port
        self.timeout = timeout
        self._client = adbutils.AdbClient(host=host, port=port, socket_timeout=timeout)
        self._device = self._client.device(serial)

    def _shell(self, command: str, timeout: float) -> ExecResult:
        _reachable(self.host, self.port)
        try:
            ret = self._device.shell2(command, timeout=timeout, v2=True)
        except AdbTimeout:
            return ExecResult(status="timeout", returncode=-1, stderr=f"timed out after {timeout:g} s")
        except (AdbError, OSError, EOFError) as exc:
            raise _lost(self.serial, exc) from exc
        return ExecResult(
            status="ok" if ret.returncode == 0 else "error",
            returncode=ret.returncode,
            stdout=ret.stdout,
            stderr=ret.stderr,
        )

    def _exec_out(self, command: str, stdin: bytes | None, timeout: float) -> bytes:
        _reachable(self.host, self.port)
        try:
            conn = self._device.open_transport(timeout=timeout)
            try:
                conn.send_command(f"exec:{command}")
                conn.check_okay()
                if stdin is not None:
                    conn.conn.sendall(stdin)
                    conn.conn.shutdown(socket.SHUT_WR)
                data = conn.read_until_close(encoding=None)
            finally:
                conn.close()
        except AdbTimeout as exc:
            raise _lost(self.serial, exc) from exc
        except (AdbError, OSError, EOFError) as exc:
            raise _lost(self.serial, exc) from exc
        assert isinstance(data, bytes)
        return data

    async def shell(self, command: str, *, timeout: float | None = None) -> ExecResult:
        """Run one device shell command line (already quoted); never raises for a non-zero exit."""
        return await asyncio.to_thread(self._shell, command, timeout or self.timeout)

    async def exec_out(
        self, command: str, *, stdin: bytes | None = None, timeout: float | None = None
    ) -> bytes:
        """The raw stdout of `command` (``adb exec-out``), optionally fed `stdin`."""
        return await asyncio.to_thread(self._exec_out, command, stdin, timeout or self.timeout)

    async def state(self) -> str:
        """The device's state as the adb server sees it (``device``, ``offline``, ...)."""
        devices = dict(await asyncio.to_thread(list_devices, self.host, self.port))
        return devices.get(self.serial, "missing")
