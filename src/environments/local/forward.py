"""A TCP door on the host's 127.0.0.1 to a desktop's controller server, for tools that only take a URL.

OSWorld's own controllers (`SetupController`, `PythonController`) and an ``aws`` fleet's
``connect_via`` speak HTTP to ``host:port`` and cannot reach a Unix socket or send a bearer
token. This forwarder relays each connection to the server (its host-side Unix socket, or a
TCP address). Given the server's token (or ``http=True``), it reads HTTP: it parses each
request's head, drops any ``Authorization``/``Connection`` headers the caller sent, adds the
token and ``Connection: close`` (and marks the response ``Connection: close`` too), so every
connection carries exactly one request and no request passes un-stamped. The token is never
logged. In that mode replies are also held to what a desktop may send
(`environments.limits`): a body over the limit is refused (502) or cut, a redirect is refused
(OSWorld's controllers use ``requests``, which would follow it anywhere), and each refusal,
and each ``413`` of the server itself, is kept in `refusals` for the caller to report.

Threat model: the desktop cannot reach this door (its network namespace has only its own
loopback), but other users of the host can reach 127.0.0.1. So every accepted connection's
peer socket is looked up in ``/proc/net/tcp`` and refused unless it belongs to this
process's own uid.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path

from environments.limits import FILE_BYTES, REPLY_SLACK

__all__ = ["BODY_LIMIT", "TcpForwarder", "connect_in_netns", "peer_uid"]

_CHUNK = 65536
#: A request or response head larger than this is refused (no legitimate controller call nears it).
_HEAD_LIMIT = 64 * 1024
#: Largest request or reply body relayed in HTTP mode: a file and its multipart wrapping.
BODY_LIMIT = FILE_BYTES + REPLY_SLACK
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
    inside that network namespace. ``http`` (on whenever there is a token) reads each
    request and reply as HTTP, one per connection, bounded (module doc); off, bytes pass as
    they are (a door to this project's own server, which checks its token itself).
    """

    def __init__(
        self,
        upstream: str | tuple[str, int],
        *,
        token: str | None = None,
        netns: Callable[[], str] | None = None,
        http: bool | None = None,
        body_limit: int = BODY_LIMIT,
    ) -> None:
        self.upstream = upstream
        self._netns = netns
        self._auth = None if token is None else b"Authorization: Bearer " + token.encode()
        self._http = token is not None if http is None else http
        if token is not None and not self._http:
            raise ValueError("a door that stamps a token reads HTTP")
        self.body_limit = body_limit
        #: Replies refused or cut by this door, and the server's own 413s: one line each.
        self.refusals: list[str] = []
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
            if not self._http:
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
        """One request per connection: stamped head, its body, then the response with a
        closing head, each bounded; a redirect or an oversized reply is answered 502."""
        stamp = [self._auth] if self._auth is not None else []
        try:
            request = _read_head(client)
            if request is None:
                return
            head, length = _rewrite_head(request[0], [*stamp, b"Connection: close"])
            target = request[0].split(b"\r\n", 1)[0].decode("latin-1", "replace")
            if length is not None and length > self.body_limit:
                _answer(client, 413, f"a request body of {length} bytes, over the door's limit of {self.body_limit}")
                return
            upstream.sendall(head)
            _send_body(client, upstream, request[1], length, chunked=b"chunked" in request[0].lower(),
                       limit=self.body_limit)  # fmt: skip
            response = _read_head(upstream)
            if response is None:
                return
            status, location = _status_of(response[0])
            out_head, reply_length = _rewrite_head(response[0], [b"Connection: close"])
            refusal = None
            if status is None:
                refusal = "a malformed status line"
            elif 300 <= status < 400 or location:
                refusal = f"a redirect ({status}) to an address the desktop chose"
            elif reply_length is not None and reply_length > self.body_limit:
                refusal = f"a reply of {reply_length} bytes, over the limit of {self.body_limit} a desktop may send"
            if refusal is not None:
                self.refusals.append(f"{target}: the door refused {refusal}")
                _answer(client, 502, f"the door refused {refusal}")
                return
            first = response[1] if reply_length is None else response[1][:reply_length]
            if status == 413:  # the server refused to send a file: keep its one line
                while reply_length is not None and len(first) < min(reply_length, _HEAD_LIMIT):
                    more = upstream.recv(_CHUNK)
                    if not more:
                        break
                    first += more[: reply_length - len(first)]
                self.refusals.append(f"{target}: {_message(first)}")
            client.sendall(out_head + first)
        except OSError:
            return
        budget = (self.body_limit if reply_length is None else reply_length) - len(first)
        if not _pump(upstream, client, limit=budget):
            self.refusals.append(f"{target}: the door cut a reply past its length or the limit of {self.body_limit} bytes")

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


def _status_of(head: bytes) -> tuple[int | None, bool]:
    """A response head's status code (None if malformed) and whether it names a Location."""
    first, *lines = head.split(b"\r\n")
    parts = first.split(b" ", 2)
    status = int(parts[1]) if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit() else None
    location = any(line.partition(b":")[0].strip().lower() == b"location" for line in lines)
    return status, location


def _message(body: bytes) -> str:
    """The one line of a JSON error body (``error`` or ``message``), else its first 300 bytes."""
    text = body[:_HEAD_LIMIT].decode("utf-8", "replace")
    with contextlib.suppress(ValueError, AttributeError):
        found = json.loads(text)
        text = str(found.get("error") or found.get("message") or text)
    return " ".join(text.split())[:300]


def _answer(client: socket.socket, status: int, message: str) -> None:
    """A small JSON error reply from the door itself."""
    body = json.dumps({"status": "error", "message": message}).encode()
    head = f"HTTP/1.1 {status} Door\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    with contextlib.suppress(OSError):
        client.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)


def _send_body(
    client: socket.socket,
    upstream: socket.socket,
    rest: bytes,
    length: int | None,
    *,
    chunked: bool,
    limit: int | None = None,
) -> None:
    """Forward exactly the request's Content-Length bytes; a chunked body is relayed until the
    caller stops or `limit` bytes have passed (the server closes after one request, so
    nothing after it is served)."""
    if chunked:
        threading.Thread(target=_pump, args=(client, upstream, rest, limit), daemon=True).start()
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


def _pump(src: socket.socket, dst: socket.socket, first: bytes = b"", limit: int | None = None) -> bool:
    """Copy until ``src`` ends, then half-close ``dst`` so its reader sees the end too.

    With `limit`, at most that many bytes (after `first`) pass: past it the copy stops,
    ``dst`` is reset rather than ended (so a reader of a body without a length sees an error,
    not a shorter body) and False is returned."""
    left = limit
    try:
        if first:
            dst.sendall(first)
        while data := src.recv(_CHUNK):
            if left is not None:
                if len(data) > left:
                    with contextlib.suppress(OSError):
                        dst.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return False
                left -= len(data)
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)
    return True
