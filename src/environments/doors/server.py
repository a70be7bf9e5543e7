"""What the host's doors to a desktop share: a server on 127.0.0.1 that only this process's
uid may use, run by an event loop of its own, and sockets made inside a desktop's network
namespace.

A door (`forward.TcpForwarder`, `desktop_door.DesktopPortDoor`) is built and closed from
synchronous code and from any event loop, so each runs its own loop on a daemon thread.
Every connection's peer socket is looked up (`peer_uid`) before a byte is read, and one of
another uid is cut: the desktops cannot reach the host's loopback (their network namespace
has only their own), but other users of the host can.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import socket
import struct
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiohttp
from aiohttp import web

__all__ = ["LoopDoor", "door_error", "ends_quietly", "own_uid_only", "peer_uid", "pump", "socket_in_netns"]

_T = TypeVar("_T")
_PROC_NET_TCP = Path("/proc/net/tcp")
_CLONE_NEWNET = 0x40000000
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
#: Where ``inet_diag_msg.idiag_uid`` sits in a reply: after the netlink header (16 bytes),
#: the family/state/timer/retransmits bytes (4), the socket id (48) and three counters (12).
_UID_AT = 16 + 4 + 48 + 12


def socket_in_netns(netns: str, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM) -> socket.socket:
    """A socket of the network namespace at `netns` (``/proc/PID/ns/net``): made by a
    short-lived thread that joins the namespace (setns affects only the calling thread); a
    socket keeps its namespace for life, wherever it is connected or bound from."""
    result: list[socket.socket | BaseException] = []

    def work() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(netns, "rb") as handle:
                if libc.setns(handle.fileno(), _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"cannot enter network namespace {netns}: {os.strerror(err)}")
            result.append(socket.socket(family, kind))
        except BaseException as exc:  # handed to the caller
            result.append(exc)

    thread = threading.Thread(target=work, name="netns-socket", daemon=True)
    thread.start()
    thread.join()
    found = result[0]
    if isinstance(found, BaseException):
        raise found
    return found


def _decode_address(field: str) -> tuple[str, int]:
    """``0100007F:1F90`` → ``("127.0.0.1", 8080)``: /proc prints the address in host byte order."""
    address, port = field.split(":")
    return socket.inet_ntoa(struct.pack("=I", int(address, 16))), int(port, 16)


def peer_uid(peer: tuple[str, int], local: tuple[str, int], table: Path = _PROC_NET_TCP) -> int | None:
    """The uid owning the TCP socket at ``peer`` connected to ``local`` (IPv4): asked of the
    kernel for that one socket (sock_diag), or, where that is not available, read from its
    whole table (`table`, which costs ~10 ms per thousand sockets on the machine)."""
    try:
        return _diag_uid(peer, local)
    except OSError:
        pass
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 8:
            continue
        if _decode_address(fields[1]) == peer and _decode_address(fields[2]) == local:
            return int(fields[7])
    return None


def _diag_uid(peer: tuple[str, int], local: tuple[str, int]) -> int | None:
    """One ``SOCK_DIAG_BY_FAMILY`` request (netlink) for the exact socket ``peer`` → ``local``."""
    sockid = (struct.pack("!HH", peer[1], local[1]) + socket.inet_aton(peer[0]) + bytes(12)
              + socket.inet_aton(local[0]) + bytes(12) + struct.pack("=III", 0, 0xFFFFFFFF, 0xFFFFFFFF))  # fmt: skip
    request = struct.pack("=BBBxI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0xFFFFFFFF) + sockid
    message = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + request
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as link:
        link.settimeout(5)
        link.send(message)
        reply = link.recv(65536)
    if len(reply) < _UID_AT + 4 or struct.unpack_from("=H", reply, 4)[0] != _SOCK_DIAG_BY_FAMILY:
        return None  # an error message: no such socket
    found: int = struct.unpack_from("=I", reply, _UID_AT)[0]
    return found


def door_error(status: int, message: str) -> web.Response:
    """A small JSON error reply from the door itself, the connection closed after it."""
    reply = web.Response(status=status, reason="Door", content_type="application/json",
                         body=json.dumps({"status": "error", "message": message}).encode())  # fmt: skip
    reply.force_close()
    return reply


class _Door(Protocol):
    port: int
    refused: int


def own_uid_only(door: _Door, protocols: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
    """A protocol factory for ``loop.create_server`` that hands a connection to one of
    `protocols` only if its peer is this process's uid (else it counts it in ``door.refused``
    and ends it before a byte is read)."""
    return lambda: _OwnUid(door, protocols())


class _OwnUid(asyncio.Protocol):
    """Hands a connection to the door's protocol only if its peer is this process's uid."""

    def __init__(self, door: _Door, inner: asyncio.Protocol) -> None:
        self._door, self._inner = door, inner
        self._refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        if peer_uid((peer[0], peer[1]), ("127.0.0.1", self._door.port)) != os.getuid():
            self._refused = True
            self._door.refused += 1
            transport.close()  # nothing was read or written: the peer sees the connection end
            return
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return None if self._refused else self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._refused:
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class LoopDoor:
    """A server on 127.0.0.1 (a free port) for this uid only, on an event loop of its own.

    Subclasses give `_protocol` (an asyncio protocol per connection; by default an aiohttp
    server calling `_handle` for each request). Given a `listener` (a listening socket made
    elsewhere, in a desktop's namespace say), the door serves that instead; ``own_uid=False``
    drops the uid check (for a listener only the desktop itself can reach). `close` stops
    listening and cuts every connection; it is safe to call twice and from any thread but the
    door's own."""

    #: Answers one request, for the default `_protocol`: HTTP doors define it, a door that
    #: gives its own `_protocol` (the proxy relay) has none.
    _handle: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]

    def __init__(self, name: str, *, listener: socket.socket | None = None, own_uid: bool = True) -> None:
        self.port = 0
        self._listener = listener
        self._own_uid = own_uid
        #: Connections of other users refused.
        self.refused = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._web: web.Server | None = None
        self._server: asyncio.Server | None = None
        #: The door's client to the desktop, made on the loop when first needed.
        self._session: aiohttp.ClientSession | None = None
        self.call(self._listen())

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def call(self, work: Awaitable[_T]) -> _T:
        """Run `work` on the door's loop and wait for its result."""
        future: Future[_T] = asyncio.run_coroutine_threadsafe(_awaited(work), self._loop)
        return future.result()

    def _protocol(self) -> asyncio.Protocol:
        if self._web is None:
            self._web = web.Server(self._handle, handler_cancellation=True, max_line_size=65536,
                                   max_field_size=65536)  # fmt: skip
        return self._web()

    async def _listen(self) -> None:
        factory = own_uid_only(self, self._protocol) if self._own_uid else self._protocol
        if self._listener is not None:
            self._server = await self._loop.create_server(factory, sock=self._listener)
        else:
            self._server = await self._loop.create_server(factory, "127.0.0.1", 0, backlog=64, reuse_address=True)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._server is not None:
            self._server.close()
        if self._web is not None:
            await self._web.shutdown(0.05)
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if self._loop.is_running():
            with contextlib.suppress(RuntimeError):
                self.call(self._stop())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        with contextlib.suppress(RuntimeError):
            self._loop.close()


def ends_quietly(
    handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]]:
    """A connection handler that ends without a traceback when its closing door cancels it.

    Python 3.11's ``StreamReaderProtocol`` asks a finished handler task for its exception,
    which raises (and logs "Exception in callback") when the task was cancelled; a door that
    closes with connections still open is not an error.
    """

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        except asyncio.CancelledError:
            writer.close()

    return run


async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until ``src`` ends, then half-close ``dst`` so its reader sees the end too."""
    with contextlib.suppress(OSError, RuntimeError):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()


async def _awaited(work: Awaitable[_T]) -> _T:
    return await work

