"""An HTTP door on the host's 127.0.0.1 to a port on a desktop's own loopback (its browser's
DevTools on 9222, say) that only ever speaks for that desktop.

Whatever listens on the desktop's port is the model's to replace (a one-line server typed
into xterm), and the host's tools follow what it answers: Playwright fetches
``/json/version`` and dials the ``webSocketDebuggerUrl`` it names, and both Playwright and
``requests`` follow redirects (Playwright even on a websocket upgrade). A raw relay would
let a desktop aim the host's root Playwright at any address of the host or its network. So
this door reads HTTP (aiohttp's server and client), one request per connection:

- the request goes in with ``Host`` naming the door (Chrome names its URLs after it), its
  head and body bounded, hop and proxy headers dropped, and ``Authorization`` too unless the
  port's own service asks for it (VLC's web interface takes OSWorld's known password; the
  host has no secret of its own to give a desktop);
- a redirect is refused (502) and no ``Location`` ever comes out;
- a JSON reply has every ``ws://`` / ``wss://`` URL, and the ``ws=`` / ``wss=`` parameter of a
  frontend URL, rewritten to name the door itself; a websocket URL hidden in any other reply
  is refused; a reply larger than `REPLY_LIMIT` is refused;
- a websocket upgrade is relayed message by message (aiohttp on both sides), at most
  `STREAM_LIMIT` bytes from the desktop; its handshake is refused if it redirects.

The door dials nothing but the desktop's port, whatever the desktop answers (the socket
itself is refused any other address). Only this process's uid may connect (`server`).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
from aiohttp import web

from .server import LoopDoor, door_error, socket_in_netns

__all__ = ["REPLY_LIMIT", "STREAM_LIMIT", "DesktopPortDoor", "rewrite_urls"]

#: Largest plain reply relayed (DevTools' biggest, /json/protocol, is a few MiB).
REPLY_LIMIT = 32 * 1024 * 1024
#: Largest request body relayed (DevTools requests have none).
REQUEST_LIMIT = 1024 * 1024
#: Bytes a websocket may bring from the desktop in all (a getter's session needs a few MiB).
STREAM_LIMIT = 64 * 1024 * 1024
_CHUNK = 65536
_DROPPED = {
    "host", "connection", "keep-alive", "proxy-connection", "proxy-authorization", "authorization",
    "upgrade", "te", "trailer", "transfer-encoding", "content-length", "expect",
}  # fmt: skip
#: Made anew by the door's own handshake with the desktop.
_HANDSHAKE = {"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol"}
_NOT_ADDED = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
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


class DesktopPortDoor(LoopDoor):
    """Listens on 127.0.0.1 (a free port) and relays HTTP to ``port`` of the desktop (module
    doc): on its own loopback, reached from inside the network namespace ``netns()`` names,
    or, without ``netns``, at ``host`` (a VM's address)."""

    def __init__(self, port: int, netns: Callable[[], str] | None = None, *, host: str = "127.0.0.1",
                 pass_authorization: bool = False) -> None:
        self.target_port = port
        self.target_host = host
        self._dropped = _DROPPED - {"authorization"} if pass_authorization else _DROPPED
        self._netns = netns
        #: Replies of the desktop refused, with why.
        self.refusals: list[str] = []
        super().__init__("desktop-door")
        self.address = f"127.0.0.1:{self.port}"

    def __enter__(self) -> DesktopPortDoor:
        return self

    def _socket(self, info: Any) -> socket.socket:
        """A socket for the desktop's port, and for no other address."""
        if tuple(info[4][:2]) != (self.target_host, self.target_port):
            raise OSError(f"the door dials only the desktop's port {self.target_port}, not {info[4][0]}:{info[4][1]}")
        return socket_in_netns(self._netns(), info[0], info[1]) if self._netns else socket.socket(info[0], info[1])

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            redirects = aiohttp.TraceConfig()
            redirects.on_request_redirect.append(_refuse_redirect)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True, socket_factory=self._socket),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=60), trace_configs=[redirects],
            )  # fmt: skip
        return self._session

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if "Transfer-Encoding" in request.headers:
            return door_error(400, "the door refused the request: a chunked request body")
        length = request.content_length or 0
        if length > REQUEST_LIMIT:
            return door_error(400, f"the door refused the request: a request body of {length} bytes, over the "
                                   f"door's limit of {REQUEST_LIMIT}")  # fmt: skip
        upgrade = request.headers.get("Upgrade", "").lower() == "websocket"
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in self._dropped]
        headers.append(("Host", self.address))
        url = f"http://{self.target_host}:{self.target_port}{request.rel_url}"
        try:
            if upgrade:
                return await self._websocket(request, url, headers)
            body = await request.content.readexactly(length) if length else None
            async with self._client().request(request.method, url, headers=headers, data=body, allow_redirects=False,
                                              skip_auto_headers=_NOT_ADDED) as reply:  # fmt: skip
                return await self._reply(reply)
        except _Refused as exc:
            self.refusals.append(str(exc))
            return door_error(502, f"the door refused the desktop's reply: {exc}")
        except OSError as exc:  # aiohttp's connection errors are OSErrors too
            return door_error(502, f"nothing answers on the desktop's port {self.target_port}: {exc}")
        except (aiohttp.ClientError, asyncio.IncompleteReadError) as exc:
            self.refusals.append(f"a malformed reply ({type(exc).__name__})")
            return door_error(502, f"the door refused the desktop's reply: {self.refusals[-1]}")

    async def _reply(self, reply: aiohttp.ClientResponse) -> web.Response:
        if 300 <= reply.status < 400 or "Location" in reply.headers:
            raise _Refused(f"a redirect ({reply.status}) to an address the desktop chose")
        if reply.status < 200:
            raise _Refused(f"a protocol switch nobody asked for ({reply.status})")
        if reply.content_length is not None and reply.content_length > REPLY_LIMIT:
            raise _Refused(f"a reply of {reply.content_length} bytes, over the door's limit of {REPLY_LIMIT}")
        parts, got = [], 0
        async for chunk in reply.content.iter_chunked(_CHUNK):
            got += len(chunk)
            if got > REPLY_LIMIT:
                raise _Refused(f"a reply over the door's limit of {REPLY_LIMIT} bytes")
            parts.append(chunk)
        body, content_type = self._checked_body(b"".join(parts), reply.headers.get("Content-Type") or "application/octet-stream")
        out = web.Response(status=reply.status, reason=reply.reason, body=body, headers={"Content-Type": content_type})
        out.force_close()
        return out

    def _checked_body(self, body: bytes, content_type: str) -> tuple[bytes, str]:
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
        return json.dumps(rewritten).encode(), "application/json; charset=UTF-8"

    async def _websocket(self, request: web.BaseRequest, url: str, headers: list[tuple[str, str]]) -> web.StreamResponse:
        """Both handshakes, then messages both ways until either side closes or the desktop has
        sent `STREAM_LIMIT` bytes."""
        asked = request.headers.get("Sec-WebSocket-Protocol", "")
        protocols = tuple(p.strip() for p in asked.split(",") if p.strip())
        headers = [(k, v) for k, v in headers if k.lower() not in _HANDSHAKE]
        try:
            upstream = await self._client().ws_connect(url, headers=headers, protocols=protocols, compress=0,
                                                       max_msg_size=STREAM_LIMIT, autoping=False)  # fmt: skip
        except aiohttp.WSServerHandshakeError as exc:
            what = f"answered {exc.status}" if exc.status != 101 else f"was not one ({exc.message})"
            raise _Refused(f"a websocket handshake {what}") from None
        async with upstream:
            client = web.WebSocketResponse(protocols=protocols, max_msg_size=STREAM_LIMIT, autoping=False, compress=False)
            await client.prepare(request)
            relays = [asyncio.ensure_future(_messages(upstream, client, STREAM_LIMIT)),
                      asyncio.ensure_future(_messages(client, upstream, None))]  # fmt: skip
            try:
                await asyncio.wait(relays, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for relay in relays:
                    relay.cancel()
                await asyncio.gather(*relays, return_exceptions=True)
                await client.close()
            return client



async def _refuse_redirect(_session: object, _context: object, params: aiohttp.TraceRequestRedirectParams) -> None:
    """A redirect is never followed: not even a websocket handshake's."""
    raise _Refused(f"a redirect ({params.response.status}) to an address the desktop chose")


async def _messages(src: Any, dst: Any, limit: int | None) -> None:
    """Relay ``src``'s messages to ``dst`` (each an aiohttp websocket) until a close, an error,
    or past `limit` bytes."""
    sent = 0
    async for message in src:
        if message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
            sent += len(message.data)
            if limit is not None and sent > limit:
                return
            await (dst.send_str(message.data) if message.type == aiohttp.WSMsgType.TEXT else dst.send_bytes(message.data))
        elif message.type == aiohttp.WSMsgType.PING:
            await dst.ping(message.data)
        elif message.type == aiohttp.WSMsgType.PONG:
            await dst.pong(message.data)
        else:
            return
