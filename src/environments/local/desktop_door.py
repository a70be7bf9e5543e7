"""An HTTP door on the host's 127.0.0.1 to a port on a desktop's own loopback (its browser's
DevTools on 9222, say) that only ever speaks for that desktop.

Whatever listens on the desktop's port is the model's to replace (a one-line server typed
into xterm), and the host's tools follow what it answers: Playwright fetches
``/json/version`` and dials the ``webSocketDebuggerUrl`` it names, and both Playwright and
``requests`` follow redirects (Playwright even on a websocket upgrade). A raw relay would
let a desktop aim the host's root Playwright at any address of the host or its network. So
this door reads HTTP, one request per connection:

- the request goes in with ``Host`` naming the door (Chrome names its URLs after it), its
  head and body bounded, hop and proxy headers dropped, and ``Authorization`` too unless the
  port's own service asks for it (VLC's web interface takes OSWorld's known password; the
  host has no secret of its own to give a desktop);
- a redirect is refused (502) and no ``Location`` ever comes out;
- a JSON reply has every ``ws://`` / ``wss://`` URL, and the ``ws=`` / ``wss=`` parameter of a
  frontend URL, rewritten to name the door itself; a websocket URL hidden in any other reply
  is refused; a reply larger than `REPLY_LIMIT` is refused;
- a websocket upgrade (101) to a request that asked for one is relayed both ways, at most
  `STREAM_LIMIT` bytes from the desktop.

Only this process's uid may connect (the peer socket's owner, from ``/proc/net/tcp``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from .forward import connect_in_netns, peer_uid

__all__ = ["REPLY_LIMIT", "STREAM_LIMIT", "DesktopPortDoor", "rewrite_urls"]

#: Largest plain reply relayed (DevTools' biggest, /json/protocol, is a few MiB).
REPLY_LIMIT = 32 * 1024 * 1024
#: Largest request body relayed (DevTools requests have none).
REQUEST_LIMIT = 1024 * 1024
#: Bytes a websocket may bring from the desktop in all (a getter's session needs a few MiB).
STREAM_LIMIT = 64 * 1024 * 1024
_HEAD_LIMIT = 64 * 1024
_CHUNK = 65536
_DROPPED = {
    b"host", b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization", b"authorization",
    b"upgrade", b"te", b"trailer", b"transfer-encoding", b"content-length", b"expect",
}  # fmt: skip
_WS_URL = re.compile(r"^wss?://", re.IGNORECASE)
_WS_PARAM = re.compile(r"([?&](?:wss?)=)([^&#]*)", re.IGNORECASE)
_WS_ANYWHERE = re.compile(rb"wss?(?:://|=|%3A%2F%2F)", re.IGNORECASE)


class _Refused(Exception):
    """The desktop's reply cannot be relayed; the message says why (to the caller, as a 502)."""


def rewrite_urls(value: Any, door: str) -> Any:
    """`value` (decoded JSON) with every websocket URL naming ``door`` (``host:port``) instead
    of whatever the desktop put there; other strings are data and stay as they are."""
    if isinstance(value, dict):
        return {k: rewrite_urls(v, door) for k, v in value.items()}
    if isinstance(value, list):
        return [rewrite_urls(v, door) for v in value]
    if not isinstance(value, str):
        return value
    if _WS_URL.match(value):
        parts = urlsplit(value)
        value = urlunsplit((parts.scheme.lower(), door, parts.path, parts.query, ""))
    return _WS_PARAM.sub(lambda m: m.group(1) + _door_param(m.group(2), door), value)


def _door_param(raw: str, door: str) -> str:
    """A frontend URL's ``ws=host:port/path`` value, naming the door."""
    text = unquote(raw)
    path = text[text.find("/") :] if "/" in text else "/"
    return door + path


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > _HEAD_LIMIT:
            raise _Refused("an HTTP head larger than 64 KiB")
        data = sock.recv(_CHUNK)
        if not data:
            raise _Refused("the connection closed before a whole HTTP head")
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    return head, rest


def _headers(head: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    first, *lines = head.split(b"\r\n")
    found = []
    for line in lines:
        name, sep, value = line.partition(b":")
        if not sep or not name.strip() or name != name.strip():
            raise _Refused("a malformed header line")
        found.append((name.strip().lower(), value.strip()))
    return first, found


def _get(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    values = [v for k, v in headers if k == name]
    if len(values) > 1:
        raise _Refused(f"{name.decode()} given twice")
    return values[0] if values else None


def _length(headers: list[tuple[bytes, bytes]], limit: int, what: str) -> int | None:
    raw = _get(headers, b"content-length")
    if raw is None:
        return None
    if not raw.isdigit():
        raise _Refused(f"a {what} with a malformed Content-Length")
    length = int(raw)
    if length > limit:
        raise _Refused(f"a {what} of {length} bytes, over the door's limit of {limit}")
    return length


def _read_exactly(sock: socket.socket, rest: bytes, length: int) -> bytes:
    parts, got = [rest[:length]], len(rest[:length])
    while got < length:
        data = sock.recv(min(_CHUNK, length - got))
        if not data:
            raise _Refused("the body ended early")
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def _read_until_close(sock: socket.socket, rest: bytes, limit: int) -> bytes:
    parts, got = [rest], len(rest)
    while data := sock.recv(_CHUNK):
        got += len(data)
        if got > limit:
            raise _Refused(f"a reply over the door's limit of {limit} bytes")
        parts.append(data)
    return b"".join(parts)


def _read_chunked(sock: socket.socket, rest: bytes, limit: int) -> bytes:
    buffer, body = rest, b""
    while True:
        while b"\r\n" not in buffer:
            if len(buffer) > 1024:
                raise _Refused("a malformed chunk size")
            data = sock.recv(_CHUNK)
            if not data:
                raise _Refused("the chunked body ended early")
            buffer += data
        line, _, buffer = buffer.partition(b"\r\n")
        try:
            size = int(line.split(b";")[0].strip(), 16)
        except ValueError:
            raise _Refused("a malformed chunk size") from None
        if len(body) + size > limit:
            raise _Refused(f"a reply over the door's limit of {limit} bytes")
        if size == 0:
            return body
        while len(buffer) < size + 2:
            data = sock.recv(_CHUNK)
            if not data:
                raise _Refused("the chunked body ended early")
            buffer += data
        body, buffer = body + buffer[:size], buffer[size + 2 :]


class DesktopPortDoor:
    """Listens on 127.0.0.1 (a free port) and relays HTTP to ``port`` of the desktop (module
    doc): on its own loopback, reached from inside the network namespace ``netns()`` names,
    or, without ``netns``, at ``host`` (a VM's address)."""

    def __init__(self, port: int, netns: Callable[[], str] | None = None, *, host: str = "127.0.0.1",
                 pass_authorization: bool = False) -> None:
        self.target_port = port
        self.target_host = host
        self._dropped = _DROPPED - {b"authorization"} if pass_authorization else _DROPPED
        self._netns = netns
        self._uid = os.getuid()
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port: int = self._server.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        #: Connections of other users refused, and replies of the desktop refused (with why).
        self.refused = 0
        self.refusals: list[str] = []
        self._closed = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"desktop-door-{self.port}", daemon=True).start()

    def __enter__(self) -> DesktopPortDoor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening and cut every relayed connection; safe to call twice."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            pending, self._open = set(self._open), set()
        for sock in pending:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

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
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, *socks: socket.socket) -> None:
        with self._lock:
            self._open |= set(socks)

    def _serve(self, client: socket.socket) -> None:
        self._track(client)
        upstream: socket.socket | None = None
        try:
            client.settimeout(60)
            try:
                head, upgrade, body = self._request(client)
            except _Refused as exc:
                self._answer(client, 400, f"the door refused the request: {exc}")
                return
            try:
                target = (self.target_host, self.target_port)
                if self._netns is not None:
                    upstream = connect_in_netns(self._netns(), target)
                else:
                    upstream = socket.create_connection(target, timeout=30)
            except OSError as exc:
                self._answer(client, 502, f"nothing answers on the desktop's port {self.target_port}: {exc}")
                return
            self._track(upstream)
            upstream.settimeout(60)
            upstream.sendall(head + body)
            try:
                self._reply(client, upstream, upgrade)
            except _Refused as exc:
                self.refusals.append(str(exc))
                self._answer(client, 502, f"the door refused the desktop's reply: {exc}")
        except OSError:
            return
        finally:
            with self._lock:
                self._open -= {client} | ({upstream} if upstream is not None else set())
            for sock in (client, upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()

    @staticmethod
    def _answer(client: socket.socket, status: int, message: str) -> None:
        body = json.dumps({"status": "error", "message": message}).encode()
        head = f"HTTP/1.1 {status} Door\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        with contextlib.suppress(OSError):
            client.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)

    def _request(self, client: socket.socket) -> tuple[bytes, bool, bytes]:
        """The request to send in (head, whether it asks for a websocket, body)."""
        raw, rest = _read_head(client)
        first, headers = _headers(raw)
        parts = first.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1.") or not parts[1].startswith(b"/"):
            raise _Refused("a malformed request line")
        if _get(headers, b"transfer-encoding") is not None:
            raise _Refused("a chunked request body")
        length = _length(headers, REQUEST_LIMIT, "request body") or 0
        upgrade = (_get(headers, b"upgrade") or b"").lower() == b"websocket"
        # After an upgrade's head come the client's first frames; they go in as they are.
        body = rest if upgrade and not length else _read_exactly(client, rest, length) if length else b""
        kept = [f"{k.decode('latin-1')}: ".encode("latin-1") + v for k, v in headers if k not in self._dropped]
        extra = [b"Host: " + self.address.encode()]
        if length:
            extra.append(b"Content-Length: %d" % length)
        extra += [b"Upgrade: websocket", b"Connection: Upgrade"] if upgrade else [b"Connection: close"]
        return b"\r\n".join([first, *kept, *extra]) + b"\r\n\r\n", upgrade, body

    def _reply(self, client: socket.socket, upstream: socket.socket, upgrade: bool) -> None:
        raw, rest = _read_head(upstream)
        first, headers = _headers(raw)
        parts = first.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise _Refused("a malformed status line")
        status = int(parts[1])
        if 300 <= status < 400 or _get(headers, b"location") is not None:
            raise _Refused(f"a redirect ({status}) to an address the desktop chose")
        if status == 101:
            if not upgrade:
                raise _Refused("a protocol switch nobody asked for")
            kept = [f"{k.decode('latin-1')}: ".encode("latin-1") + v for k, v in headers]
            client.sendall(b"\r\n".join([first, *kept]) + b"\r\n\r\n")
            self._relay_websocket(client, upstream, rest)
            return
        if (_get(headers, b"transfer-encoding") or b"").lower() == b"chunked":
            body = _read_chunked(upstream, rest, REPLY_LIMIT)
        else:
            length = _length(headers, REPLY_LIMIT, "reply")
            body = _read_until_close(upstream, rest, REPLY_LIMIT) if length is None else _read_exactly(upstream, rest, length)
        body, content_type = self._checked_body(body, _get(headers, b"content-type") or b"application/octet-stream")
        reason = parts[2] if len(parts) > 2 else b""
        out = [
            b"HTTP/1.1 %d " % status + reason,
            b"Content-Type: " + content_type,
            b"Content-Length: %d" % len(body),
            b"Connection: close",
        ]
        client.sendall(b"\r\n".join(out) + b"\r\n\r\n" + body)

    def _checked_body(self, body: bytes, content_type: bytes) -> tuple[bytes, bytes]:
        """The reply's body with its websocket URLs naming the door, or `_Refused`."""
        if not body.strip():
            return body, content_type
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            if _WS_ANYWHERE.search(body):
                raise _Refused("a websocket address in a reply that is not JSON") from None
            return body, content_type
        try:
            rewritten = rewrite_urls(decoded, self.address)
        except RecursionError:
            raise _Refused("a JSON reply nested too deep") from None
        return json.dumps(rewritten).encode(), b"application/json; charset=UTF-8"

    def _relay_websocket(self, client: socket.socket, upstream: socket.socket, first: bytes) -> None:
        client.settimeout(None)
        upstream.settimeout(None)
        back = threading.Thread(target=_pump, args=(client, upstream, b"", None), daemon=True)
        back.start()
        _pump(upstream, client, first, STREAM_LIMIT)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_RDWR)
        back.join(5)


def _pump(src: socket.socket, dst: socket.socket, first: bytes, limit: int | None) -> None:
    """Copy until ``src`` ends (or `limit` bytes have passed), then half-close ``dst``."""
    sent = 0
    try:
        data = first
        while True:
            if data:
                sent += len(data)
                if limit is not None and sent > limit:
                    return
                dst.sendall(data)
            data = src.recv(_CHUNK)
            if not data:
                return
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
