"""The host's doors to a desktop, against a direct connection, in the same run.

A small HTTP server on this machine's loopback plays the desktop's port (a DevTools-sized
JSON reply for ``/json/version``) and its controller server (a Unix socket, bearer token
checked). Each figure is measured with one fresh connection per request, as the doors serve
them (one request per connection), sequentially:

- ``direct``: the server itself, over TCP (the reference);
- ``desktop door``: `DesktopPortDoor` (reads the request and the reply, rewrites the JSON's
  websocket URLs), entering this process's own network namespace per connection;
- ``controller door``: `TcpForwarder` stamping the token, to the Unix socket.

With ``--against REV``, the same two doors as they were at git revision REV (their modules
read from git into a scratch package) are measured in the same run, interleaved with
today's, so a change to the doors is measured against what it replaced on the same load.

Prints requests/s and p50/p95 latency for each, and each door's ratio to the direct figure
(the machine is shared: compare ratios, not absolute numbers). Needs root (setns).

    python benchmarks/door.py [-n 400] [--against cda9e41]
"""

from __future__ import annotations

import argparse
import http.client
import importlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

from environments.doors.desktop_door import DesktopPortDoor
from environments.doors.forward import TcpForwarder

TOKEN = "bench-token"
_ROUNDS = 8
_VERSION = json.dumps({
    "Browser": "Chrome/120.0", "Protocol-Version": "1.3", "User-Agent": "Mozilla/5.0 " * 8,
    "webSocketDebuggerUrl": "ws://127.0.0.1:9222/devtools/browser/0b7c1d6e-1f2a-4c3b-9d8e-7f6a5b4c3d2e",
}).encode()  # fmt: skip


class _Desktop(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.server.server_address and isinstance(self.server.server_address, str):
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self.send_error(401)
                return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(_VERSION)))
        self.end_headers()
        self.wfile.write(_VERSION)

    def log_message(self, *_: object) -> None:
        return None


class _UnixServer(ThreadingHTTPServer):
    address_family = socket.AF_UNIX
    daemon_threads = True

    def server_bind(self) -> None:
        self.socket.bind(self.server_address)
        self.server_name, self.server_port = "desktop", 0


def _times(port: int, n: int) -> list[float]:
    """Seconds for each of `n` sequential GETs, a fresh connection each."""
    times = []
    for _ in range(n):
        began = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/json/version")
        reply = conn.getresponse()
        body = reply.read()
        conn.close()
        if reply.status != 200 or b"webSocketDebuggerUrl" not in body:
            raise SystemExit(f"bad reply through port {port}: {reply.status} {body[:200]!r}")
        times.append(time.perf_counter() - began)
    return times


def _figures(times: list[float]) -> tuple[float, float, float]:
    """(requests/s, p50 ms, p95 ms)."""
    cuts = statistics.quantiles(times, n=20)
    return len(times) / sum(times), statistics.median(times) * 1000, cuts[18] * 1000


def _modules_at(rev: str, folder: str) -> tuple[ModuleType, ModuleType]:
    """The doors' modules as they were at `rev`, imported as the package ``doors_<rev>``."""
    package = Path(folder) / f"doors_{rev}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    root = Path(__file__).resolve().parent.parent
    for name in ("forward", "desktop_door", "server"):
        for room in ("doors", "local"):  # where they live now, and where they lived before
            shown = subprocess.run(["git", "-C", str(root), "show", f"{rev}:src/environments/{room}/{name}.py"],
                                   capture_output=True, text=True, check=False)  # fmt: skip
            if shown.returncode == 0:
                (package / f"{name}.py").write_text(shown.stdout)
                break
    sys.path.insert(0, folder)
    return (importlib.import_module(f"doors_{rev}.desktop_door"), importlib.import_module(f"doors_{rev}.forward"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=400, help="requests per figure")
    parser.add_argument("--against", metavar="REV", help="also measure the doors as they were at this git revision")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the desktop door enters a network namespace: run as root")
    tcp = ThreadingHTTPServer(("127.0.0.1", 0), _Desktop)
    tcp.daemon_threads = True
    folder = tempfile.mkdtemp(prefix="door-bench-")
    unix = _UnixServer(os.path.join(folder, "ctl.sock"), _Desktop)  # type: ignore[arg-type]
    for server in (tcp, unix):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    port = int(tcp.server_address[1])
    kinds: list[tuple[str, Any, Any]] = [("", DesktopPortDoor, TcpForwarder)]
    if args.against:
        old_desktop, old_forward = _modules_at(args.against, folder)
        kinds.append((f" @{args.against}", old_desktop.DesktopPortDoor, old_forward.TcpForwarder))
    doors: list[tuple[str, Callable[[], Any]]] = []
    for suffix, desktop_door, forwarder in kinds:
        doors.append((f"desktop door{suffix}", lambda d=desktop_door: d(port, lambda: "/proc/self/ns/net")))
        doors.append((f"controller door{suffix}", lambda f=forwarder: f(str(unix.server_address), token=TOKEN)))
    opened = [(name, make()) for name, make in doors]
    times: dict[str, list[float]] = {"direct": []} | {name: [] for name, _ in opened}
    ports = {"direct": port} | {name: door.port for name, door in opened}
    try:
        for at in ports.values():
            _times(at, 20)  # warm up
        for _ in range(_ROUNDS):  # interleaved, so each path sees the same load
            for name, at in ports.items():
                times[name] += _times(at, max(1, args.n // _ROUNDS))
    finally:
        for _, door in opened:
            door.close()
    rows = [(name, _figures(found)) for name, found in times.items()]
    tcp.shutdown()
    unix.shutdown()
    reference = rows[0][1]
    print(f"{'path':<28} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'req/s ratio':>12} {'p50 ratio':>10}")
    for name, (rate, p50, p95) in rows:
        print(f"{name:<28} {rate:>8.0f} {p50:>8.2f} {p95:>8.2f} {rate / reference[0]:>12.2f} {p50 / reference[1]:>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
