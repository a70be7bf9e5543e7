"""A small client of QEMU's machine protocol (QMP) over one end of a socket pair.

QEMU gets the other end as an inherited descriptor, so the monitor has no path on disk at
all: only the process that started QEMU can talk to it. Descriptors (a snapshot's state
file) travel with a command as ``SCM_RIGHTS`` (`execute(..., fds=[fd])`, for ``getfd``).
Events QEMU sends between replies are kept in `events` (``STOP``, ``SHUTDOWN``, ...).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Sequence
from typing import Any

from core.protocols import EnvError, EnvironmentLost

__all__ = ["QMP", "QMPError"]

_LIMIT = 16 * 1024 * 1024


class QMPError(EnvError):
    """QEMU refused a command; the message is QEMU's own ``desc``."""


class QMP:
    """``qmp = QMP(sock); await qmp.start(); await qmp.execute("stop")``."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._buffer = b""
        self._lock = asyncio.Lock()
        self.events: list[dict[str, Any]] = []
        self.greeting: dict[str, Any] | None = None

    async def start(self, timeout: float = 60.0) -> None:
        """Read QEMU's greeting and leave negotiation mode."""
        self.greeting = await asyncio.wait_for(self._message(), timeout)
        await self.execute("qmp_capabilities", timeout=timeout)

    async def execute(self, command: str, arguments: dict[str, Any] | None = None, *,
                      fds: Sequence[int] = (), timeout: float = 60.0) -> Any:
        """Run one command and return its ``return`` value; `QMPError` on QEMU's refusal,
        `EnvironmentLost` when QEMU is gone."""
        request: dict[str, Any] = {"execute": command}
        if arguments:
            request["arguments"] = arguments
        data = json.dumps(request).encode() + b"\n"
        async with self._lock:
            try:
                if fds:
                    await asyncio.to_thread(self._send_with_fds, data, list(fds))
                else:
                    await asyncio.get_running_loop().sock_sendall(self._sock, data)
                while True:
                    reply = await asyncio.wait_for(self._message(), timeout)
                    if "event" in reply:
                        self.events.append(reply)
                        continue
                    break
            except (OSError, EOFError) as e:
                raise EnvironmentLost(f"QEMU's monitor is gone ({e or 'closed'})") from None
        if "error" in reply:
            raise QMPError(f"QEMU refused {command}: {reply['error'].get('desc', reply['error'])}")
        return reply.get("return")

    def _send_with_fds(self, data: bytes, fds: list[int]) -> None:
        self._sock.setblocking(True)
        try:
            socket.send_fds(self._sock, [data], fds)
        finally:
            self._sock.setblocking(False)

    async def _message(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        while b"\n" not in self._buffer:
            chunk = await loop.sock_recv(self._sock, 65536)
            if not chunk:
                raise EOFError("QEMU closed its monitor")
            self._buffer += chunk
            if len(self._buffer) > _LIMIT:
                raise EOFError("QEMU's monitor sent an oversized message")
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        if not isinstance(message, dict):
            raise EOFError("QEMU's monitor sent something that is not a JSON object")
        return message

    async def wait_event(self, name: str, timeout: float) -> dict[str, Any]:
        """Wait for the event `name` (one seen already counts)."""
        for event in self.events:
            if event.get("event") == name:
                return event
        async with self._lock:
            async def until() -> dict[str, Any]:
                while True:
                    message = await self._message()
                    if "event" in message:
                        self.events.append(message)
                        if message["event"] == name:
                            return message
            return await asyncio.wait_for(until(), timeout)

    def close(self) -> None:
        self._sock.close()
