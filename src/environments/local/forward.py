"""A TCP door on the host's 127.0.0.1 to a desktop's controller server, for tools that only take a URL.

OSWorld's own controllers (`SetupController`, `PythonController`) and an ``aws`` fleet's
``connect_via`` speak HTTP to ``host:port`` and cannot reach a Unix socket or send a bearer
token. This forwarder relays each connection to the server (its host-side Unix socket, or a
TCP address). Given the server's token, it also injects it: it parses each request's head,
drops any ``Authorization``/``Connection`` headers the caller sent, adds the token and
``Connection: close`` (and marks the response ``Connection: close`` too), so every connection
carries exactly one request and no request passes un-stamped. The token is never logged.

Threat model: the desktop cannot reach this door (its network namespace has only its own
loopback), but other users of the host can reach 127.0.0.1. So every accepted connection's
peer socket is looked up in ``/proc/net/tcp`` and refused unless it belongs to this
process's own uid.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["TcpForwarder", "connect_in_netns", "peer_uid"]

_CHUNK = 65536
#: A request or response head larger than this is refused (no legitimate controller call nears it).
_HEAD_LIMIT = 64 * 1024
_HOP_HEADERS = {b"authorization", b"connection", b"keep-alive", b"proxy-connection"}
_PROC_NET_TCP = Path("/proc/net/tcp")
_CLONE_NEWNET = 0x40000000


def connect_in_netns(netns: str, address: tuple[str, int], timeout: float = 30.0) -> socket.socket:
    """A TCP connection made from inside the network namespace at `netns` (``/proc/PID/ns/net``).

    A desktop's loopback (where its browser's DevTools port listens) is reachable only from
    inside its namespace. The socket is created in a short-lived thread that joins the
    namespace (setns affects only the calling thread), and keeps working after that thread ends.
    """
    result: list[socket.socket | BaseException] = []

    def work() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(netns, "rb") as handle:
                if libc.setns(handle.fileno(), _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"cannot enter network namespace {netns}: {os.strerror(err)}")
            result.append(socket.create_connection(address, timeout=timeout))
        except BaseException as exc:  # handed to the caller
            result.append(exc)

    thread = threading.Thread(target=work, name="netns-connect", daemon=True)
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
    """The uid owning the TCP socket at ``peer`` connected to ``local``, from the kernel's table."""
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


def _read_head(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """Read up to the blank line ending an HTTP head: (head without it, bytes read past it)."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > _HEAD_LIMIT:
            return None
        data = sock.recv(_CHUNK)
        if not data:
            return None
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    return head, rest


def _rewrite_head(head: bytes, extra: list[bytes]) -> tuple[bytes, int | None]:
    """Drop hop and auth headers, append `extra`; also return the Content-Length, if any."""
    first, *lines = head.split(b"\r\n")
    kept: list[bytes] = []
    length: int | None = None
    for line in lines:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key in _HOP_HEADERS:
            continue
        if key == b"content-length":
            with contextlib.suppress(ValueError):
                length = int(value.strip())
        kept.append(line)
    return b"\r\n".join([first, *kept, *extra]) + b"\r\n\r\n", length


class TcpForwarder:
    """Listens on 127.0.0.1 (a free port) and relays each connection of this uid to ``upstream``.

    ``upstream`` is a Unix socket path or a ``(host, port)``; with ``token``, every request is
    stamped with ``Authorization: Bearer <token>``; with ``netns`` (which returns a
    ``/proc/PID/ns/net`` path when a connection comes), a ``(host, port)`` is reached from
    inside that network namespace.
    """

    def __init__(
        self,
        upstream: str | tuple[str, int],
        *,
        token: str | None = None,
        netns: Callable[[], str] | None = None,
    ) -> None:
        self.upstream = upstream
        self._netns = netns
        self._auth = None if token is None else b"Authorization: Bearer " + token.encode()
        self._uid = os.getuid()
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port: int = self._server.getsockname()[1]
        self.refused = 0
        self._closed = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"forward-{self.port}", daemon=True).start()

    def __enter__(self) -> TcpForwarder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _connect_upstream(self) -> socket.socket:
        if isinstance(self.upstream, str):
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.upstream)
            return upstream
        if self._netns is not None:
            return connect_in_netns(self._netns(), self.upstream)
        return socket.create_connection(self.upstream, timeout=30)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, peer = self._server.accept()
            except OSError:
                return
            if peer_uid((peer[0], peer[1]), ("127.0.0.1", self.port)) != self._uid:
                self.refused += 1
                with contextlib.suppress(OSError):
                    client.close()
                continue
            try:
                upstream = self._connect_upstream()
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, upstream}
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            if self._auth is None:
                back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
                back.start()
                _pump(client, upstream)
                back.join()
            else:
                self._relay_stamped(client, upstream)
        finally:
            with self._lock:
                self._open -= {client, upstream}
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()

    def _relay_stamped(self, client: socket.socket, upstream: socket.socket) -> None:
        """One request per connection: stamped head, its body, then the response with a closing head."""
        assert self._auth is not None
        try:
            request = _read_head(client)
            if request is None:
                return
            head, length = _rewrite_head(request[0], [self._auth, b"Connection: close"])
            upstream.sendall(head)
            _send_body(client, upstream, request[1], length, chunked=b"chunked" in request[0].lower())
            response = _read_head(upstream)
            if response is None:
                return
            out_head, _ = _rewrite_head(response[0], [b"Connection: close"])
            client.sendall(out_head + response[1])
        except OSError:
            return
        _pump(upstream, client)

    def close(self) -> None:
        """Stop listening and cut every relayed connection; safe to call twice."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            pending, self._open = set(self._open), set()
        for sock in pending:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


def _send_body(
    client: socket.socket, upstream: socket.socket, rest: bytes, length: int | None, *, chunked: bool
) -> None:
    """Forward exactly the request's Content-Length bytes; a chunked body is relayed until the
    caller stops (the server closes after one request, so nothing after it is served)."""
    if chunked:
        threading.Thread(target=_pump, args=(client, upstream, rest), daemon=True).start()
        return
    remaining = length or 0
    chunk = rest[:remaining]
    while True:
        if chunk:
            upstream.sendall(chunk)
            remaining -= len(chunk)
        if remaining <= 0:
            return
        chunk = client.recv(min(_CHUNK, remaining))
        if not chunk:
            return


def _pump(src: socket.socket, dst: socket.socket, first: bytes = b"") -> None:
    """Copy until ``src`` ends, then half-close ``dst`` so its reader sees the end too."""
    try:
        if first:
            dst.sendall(first)
        while data := src.recv(_CHUNK):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
