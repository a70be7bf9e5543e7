"""A door on the host's 127.0.0.1 to a desktop's controller server, for tools that only take a URL.

OSWorld's own controllers (`SetupController`, `PythonController`) and an ``aws`` fleet's
``connect_via`` speak HTTP to ``host:port`` and cannot reach a Unix socket or send a bearer
token. This door relays to the server (its host-side Unix socket, or a TCP address). Given
the server's token (or ``http=True``), it reads HTTP (aiohttp's server and client): each
request goes on with any ``Authorization`` and hop headers the caller sent dropped and the
token added, one request per connection (``Connection: close`` both ways), so no request
passes un-stamped. The token is never logged. Replies are held to what a desktop may send
(`environments.limits`): a body over the limit is refused (502) or cut, a redirect is
refused (OSWorld's controllers use ``requests``, which would follow it anywhere), and each
refusal, and each ``413`` of the server itself, is kept in `refusals` for the caller to report.
Without HTTP, bytes pass as they are (a door to this project's own server, which checks its
token itself).

Threat model: the desktop cannot reach this door (its network namespace has only its own
loopback), but other users of the host can reach 127.0.0.1: only this process's uid may
connect (`server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from aiohttp import web

from environments.limits import FILE_BYTES, REPLY_SLACK

from .server import LoopDoor, door_error, ends_quietly, peer_uid, pump, socket_in_netns

__all__ = ["BODY_LIMIT", "TcpForwarder", "peer_uid"]

_CHUNK = 65536
#: The most of a server's own 413 reply read for its one line.
_MESSAGE_LIMIT = 64 * 1024
#: Largest request or reply body relayed in HTTP mode: a file and its multipart wrapping.
BODY_LIMIT = FILE_BYTES + REPLY_SLACK
_HOP = {"authorization", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "expect", "te",
        "trailer", "upgrade"}  # fmt: skip
_NOT_ADDED = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")


class _Cut(Exception):
    """A request body over the door's limit."""


class TcpForwarder(LoopDoor):
    """Listens on 127.0.0.1 (a free port) and relays each connection of this uid to ``upstream``.

    ``upstream`` is a Unix socket path or a ``(host, port)``; with ``token``, every request is
    stamped with ``Authorization: Bearer <token>``; with ``netns`` (which returns a
    ``/proc/PID/ns/net`` path when a connection comes), a ``(host, port)`` is reached from
    inside that network namespace. ``http`` (on whenever there is a token) reads each
    request and reply as HTTP, one per connection, bounded (module doc).
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
        self._auth = None if token is None else f"Bearer {token}"
        self._http = token is not None if http is None else http
        if token is not None and not self._http:
            raise ValueError("a door that stamps a token reads HTTP")
        self.body_limit = body_limit
        #: Replies refused or cut by this door, and the server's own 413s: one line each.
        self.refusals: list[str] = []
        super().__init__("forward")

    def __enter__(self) -> TcpForwarder:
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _protocol(self) -> asyncio.Protocol:
        if self._http:
            return super()._protocol()
        reader = asyncio.StreamReader(limit=_CHUNK)
        return asyncio.StreamReaderProtocol(reader, ends_quietly(self._pipe))

    def _socket(self, info: Any) -> socket.socket:
        assert self._netns is not None
        return socket_in_netns(self._netns(), info[0], info[1])

    def _connector(self) -> aiohttp.BaseConnector:
        if isinstance(self.upstream, str):
            return aiohttp.UnixConnector(path=self.upstream, force_close=True)
        return aiohttp.TCPConnector(force_close=True, socket_factory=self._socket if self._netns else None)

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if isinstance(self.upstream, str):
            return await asyncio.open_unix_connection(self.upstream, limit=_CHUNK)
        if self._netns is None:
            return await asyncio.open_connection(*self.upstream, limit=_CHUNK)
        sock = socket_in_netns(self._netns())
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, self.upstream)
        except OSError:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock, limit=_CHUNK)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Bytes both ways, as they are, until both sides have ended."""
        try:
            theirs, upstream = await self._open()
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(pump(reader, upstream), pump(theirs, writer))
        finally:
            for side in (writer, upstream):
                side.close()

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        target = f"{request.method} {request.raw_path} HTTP/{request.version.major}.{request.version.minor}"
        length = request.content_length
        if length is not None and length > self.body_limit:
            return door_error(413, f"a request body of {length} bytes, over the door's limit of {self.body_limit}")
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        headers += [("Authorization", self._auth)] if self._auth is not None else []
        headers.append(("Connection", "close"))
        body = _bounded(request.content, self.body_limit) if length or request.body_exists else None
        if self._session is None:
            self._session = aiohttp.ClientSession(connector=self._connector(), auto_decompress=False,
                                                  timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))  # fmt: skip
        base = "http://localhost" if isinstance(self.upstream, str) else f"http://{self.upstream[0]}:{self.upstream[1]}"
        try:
            async with self._session.request(request.method, base + str(request.rel_url), headers=headers, data=body,
                                             allow_redirects=False, skip_auto_headers=_NOT_ADDED) as reply:  # fmt: skip
                return await self._relay_reply(request, reply, target)
        except (aiohttp.ClientError, OSError, _Cut) as exc:
            return door_error(502, f"the door could not relay the request: {type(exc).__name__}")

    async def _relay_reply(self, request: web.BaseRequest, reply: aiohttp.ClientResponse, target: str) -> web.StreamResponse:
        """The server's reply, bounded, with a closing head; a redirect or an oversized reply is answered 502."""
        length = reply.content_length
        refusal = None
        if 300 <= reply.status < 400 or "Location" in reply.headers:
            refusal = f"a redirect ({reply.status}) to an address the desktop chose"
        elif length is not None and length > self.body_limit:
            refusal = f"a reply of {length} bytes, over the limit of {self.body_limit} a desktop may send"
        if refusal is not None:
            self.refusals.append(f"{target}: the door refused {refusal}")
            return door_error(502, f"the door refused {refusal}")
        out = web.StreamResponse(status=reply.status, reason=reply.reason,
                                 headers=[(k, v) for k, v in reply.headers.items()
                                          if k.lower() not in _HOP and k.lower() != "content-length"])  # fmt: skip
        out.content_length = length
        out.force_close()
        first = b""
        if reply.status == 413:  # the server refused to send a file: keep its one line
            first = await reply.content.read(min(length if length is not None else _MESSAGE_LIMIT, _MESSAGE_LIMIT))
            self.refusals.append(f"{target}: {_message(first)}")
        await out.prepare(request)
        budget = self.body_limit if length is None else length
        sent = len(first)
        if first:
            await out.write(first)
        async for chunk in reply.content.iter_chunked(_CHUNK):
            sent += len(chunk)
            if sent > budget:  # reset, not ended: a reader sees an error, never a shorter body
                self.refusals.append(f"{target}: the door cut a reply past its length or the limit of {self.body_limit} bytes")
                if request.transport is not None:
                    request.transport.abort()
                return out
            await out.write(chunk)
        await out.write_eof()
        return out



async def _bounded(content: aiohttp.StreamReader, limit: int) -> AsyncIterator[bytes]:
    """A request body as it comes, ended by `_Cut` past `limit` bytes."""
    sent = 0
    async for chunk in content.iter_chunked(_CHUNK):
        sent += len(chunk)
        if sent > limit:
            raise _Cut(f"a request body over the door's limit of {limit} bytes")
        yield chunk


def _message(body: bytes) -> str:
    """The one line of a JSON error body (``error`` or ``message``), else its first 300 bytes."""
    text = body[:_MESSAGE_LIMIT].decode("utf-8", "replace")
    with contextlib.suppress(ValueError, AttributeError):
        found = json.loads(text)
        text = str(found.get("error") or found.get("message") or text)
    return " ".join(text.split())[:300]
