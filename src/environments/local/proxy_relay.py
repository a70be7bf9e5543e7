"""OSWorld's proxy on a local desktop: the part tinyproxy plays in OSWorld's VM, played from
the host.

On an OSWorld VM, ``_proxy_setup`` installs tinyproxy on the VM's ``127.0.0.1:18888`` with
the pool's proxy as upstream (and its credentials), and the task's Chrome is started with
``--proxy-server=http://127.0.0.1:18888``. A local desktop has no package manager and no
root, so this relay listens on ``127.0.0.1:18888`` inside the desktop's own network
namespace (the socket is made by a thread that joins the namespace, like the browser door's
connection) and sends each request to the upstream proxy with its ``Proxy-Authorization``,
as tinyproxy's ``Upstream http user:pass@host:port`` does. The credentials never enter the
desktop: its shell's ``http(s)_proxy`` point at the relay, not at the upstream. The relay
reaches only the pool's proxy, whatever the desktop asks: the destination is the upstream's
business. Each connection carries one request (``Connection: close``) unless it is a
``CONNECT`` tunnel, so no request passes without the credentials.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import socket

from environments.doors.server import LoopDoor, ends_quietly, pump, socket_in_netns

__all__ = ["ProxyRelay", "listen_in_netns"]

_log = logging.getLogger("environments.local.proxy_relay")
_HEAD_LIMIT = 64 * 1024
_DROP = {b"proxy-authorization", b"proxy-connection", b"connection", b"keep-alive"}


def listen_in_netns(netns: str, port: int, *, host: str = "127.0.0.1") -> socket.socket:
    """A listening TCP socket on ``host:port`` inside the network namespace at `netns`."""
    sock = socket_in_netns(netns)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


class ProxyRelay(LoopDoor):
    """``127.0.0.1:port`` in a desktop's namespace, relayed to an upstream HTTP proxy."""

    def __init__(self, netns: str, upstream: tuple[str, int], *, username: str | None = None,
                 password: str | None = None, port: int = 18888) -> None:
        self.upstream = upstream
        self._auth = None
        if username and password:
            token = base64.b64encode(f"{username}:{password}".encode()).decode()
            self._auth = f"Proxy-Authorization: Basic {token}".encode()
        self.relayed = 0
        # Only the desktop reaches its own loopback: no uid to check there.
        super().__init__(f"proxy-relay-{port}", listener=listen_in_netns(netns, port), own_uid=False)

    def __repr__(self) -> str:  # never show the credentials
        return f"ProxyRelay(port={self.port}, upstream={self.upstream[0]}:{self.upstream[1]})"

    def _protocol(self) -> asyncio.Protocol:
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(limit=_HEAD_LIMIT), ends_quietly(self._serve))

    def _rewrite(self, head: bytes) -> bytes:
        lines = head.split(b"\r\n")
        tunnel = lines[0].upper().startswith(b"CONNECT ")
        kept = [line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in _DROP]
        extra = ([self._auth] if self._auth else []) + ([] if tunnel else [b"Connection: close"])
        return b"\r\n".join([lines[0], *kept, *extra]) + b"\r\n\r\n"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            theirs, upstream = await asyncio.wait_for(asyncio.open_connection(*self.upstream), 30)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        except (OSError, TimeoutError) as exc:
            _log.warning("the proxy relay could not reach the upstream proxy (%s)", type(exc).__name__)
            writer.close()
            return
        try:
            upstream.write(self._rewrite(head[:-4]))
            self.relayed += 1
            await asyncio.gather(pump(reader, upstream), pump(theirs, writer))
        finally:
            writer.close()
            upstream.close()
