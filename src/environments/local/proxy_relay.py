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

import base64
import contextlib
import logging
import socket
import threading

from environments.doors.server import socket_in_netns

__all__ = ["ProxyRelay", "listen_in_netns"]

_log = logging.getLogger("environments.local.proxy_relay")
_HEAD_LIMIT = 64 * 1024
_CHUNK = 65536
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


class ProxyRelay:
    """``127.0.0.1:port`` in a desktop's namespace, relayed to an upstream HTTP proxy."""

    def __init__(self, netns: str, upstream: tuple[str, int], *, username: str | None = None,
                 password: str | None = None, port: int = 18888) -> None:
        self.upstream = upstream
        self.port = port
        self._auth = None
        if username and password:
            token = base64.b64encode(f"{username}:{password}".encode()).decode()
            self._auth = f"Proxy-Authorization: Basic {token}".encode()
        self._listener = listen_in_netns(netns, port)
        self._closed = False
        self.relayed = 0
        self._thread = threading.Thread(target=self._accept, name=f"proxy-relay-{port}", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:  # never show the credentials
        return f"ProxyRelay(port={self.port}, upstream={self.upstream[0]}:{self.upstream[1]})"

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), name="proxy-relay-conn", daemon=True).start()

    def _head(self, client: socket.socket) -> tuple[bytes, bytes] | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = client.recv(_CHUNK)
            if not chunk or len(data) > _HEAD_LIMIT:
                return None
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        return head, rest

    def _rewrite(self, head: bytes) -> tuple[bytes, bool]:
        lines = head.split(b"\r\n")
        tunnel = lines[0].upper().startswith(b"CONNECT ")
        kept = [line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in _DROP]
        extra = ([self._auth] if self._auth else []) + ([] if tunnel else [b"Connection: close"])
        return b"\r\n".join([lines[0], *kept, *extra]) + b"\r\n\r\n", tunnel

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            found = self._head(client)
            if found is None:
                return
            head, _ = self._rewrite(found[0])
            upstream = socket.create_connection(self.upstream, timeout=30)
            upstream.settimeout(None)
            upstream.sendall(head + found[1])
            self.relayed += 1

            def pump(src: socket.socket, dst: socket.socket) -> None:
                try:
                    while chunk := src.recv(_CHUNK):
                        dst.sendall(chunk)
                except OSError:
                    pass
                finally:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)

            back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
            back.start()
            pump(client, upstream)
            back.join(timeout=600)
        except OSError as exc:
            _log.warning("the proxy relay could not reach the upstream proxy (%s)", type(exc).__name__)
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()
