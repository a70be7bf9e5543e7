"""A local adb server speaking the adb host protocol over TCP, backed by simulated devices.

The protocol facts this follows (AOSP `packages/modules/adb`, `OVERVIEW.TXT`,
`SERVICES.TXT`, `protocol.txt` and `SYNC.TXT`):

- A client request is a 4-digit hex length followed by that many bytes of service name
  (``000chost:version``). The server answers ``OKAY`` or ``FAIL`` followed by a 4-hex-length
  message. Host services that return data send it as one length-prefixed block after OKAY.
- ``host:version`` answers OKAY and the internal version as a 4-hex block (``0004`` ``0029``
  for 41). ``host:devices`` / ``host:devices-l`` answer one block of lines
  ``<serial>\\t<state>`` (``-l`` adds ``product: model: device: transport_id:`` fields).
- ``host:transport:<serial>`` (and ``host:transport-any``, ``host:transport-local`` for the
  one emulator, ``host:transport-id:<id>``) answer OKAY and switch the connection to that
  device; the next request on the same socket is a device service. ``host:tport:serial:<s>``
  (and ``tport:any``/``tport:local``) answer OKAY followed by the 8-byte little-endian
  transport id, then switch the same way. An unknown serial fails with
  ``device '<serial>' not found``.
- ``host-serial:<serial>:<request>`` runs a per-device host request such as ``features``,
  ``get-state`` or ``get-serialno``; each answers OKAY and one block.
- ``shell:<command>`` answers OKAY, then the raw output bytes (stdout and stderr merged, no
  exit status), then the device closes the stream. ``shell,v2[,args]:<command>`` answers OKAY
  then packets of 1 id byte + 4-byte little-endian length + payload: id 1 stdout, 2 stderr,
  3 exit (one byte, the status); the client may send 0 stdin and 4 close-stdin packets.
- ``exec:<command>`` answers OKAY, then the command's raw, unmodified output (no pty, no
  line-ending translation: the way ``adb exec-out screencap -p`` gets a clean PNG); data the
  client writes is the command's stdin until the client shuts its write side.
- ``sync:`` is not served: this device answers FAIL, which the client must surface.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
from collections.abc import Iterable

from .device import SimulatedDevice
from .shell import run_shell

__all__ = ["FEATURES", "FakeAdbServer"]

#: Internal adb version this server reports (platform-tools 34 and later report 41).
VERSION = 41
FEATURES = (
    "shell_v2,cmd,stat_v2,ls_v2,fixed_push_mkdir,apex,abb,fixed_push_symlink_timestamp,abb_exec,remount_shell"
)


class _Closed(Exception):
    pass


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise _Closed
        data += chunk
    return data


def _block(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return f"{len(raw):04x}".encode() + raw


class FakeAdbServer:
    """Serves `devices` on 127.0.0.1 (an ephemeral port unless `port` is given).

    Use as a context manager, or `start()` / `stop()`. `requests` records every service
    request received, in order, so tests can check what the client sent.
    """

    def __init__(self, devices: Iterable[SimulatedDevice] = (), *, port: int = 0) -> None:
        self.devices: dict[str, SimulatedDevice] = {d.serial: d for d in devices}
        self.requests: list[str] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                try:
                    owner._serve(self.request)
                except (_Closed, ConnectionError, OSError):
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", port), Handler, bind_and_activate=True)
        self.port: int = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FakeAdbServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-adb", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, device: SimulatedDevice) -> None:
        with self._lock:
            self.devices[device.serial] = device

    # -- protocol ---------------------------------------------------------------------

    def _transport_id(self, serial: str) -> int:
        return list(self.devices).index(serial) + 1

    def _serve(self, sock: socket.socket) -> None:
        device: SimulatedDevice | None = None
        while True:
            length = int(_recv_exact(sock, 4), 16)
            request = _recv_exact(sock, length).decode()
            with self._lock:
                self.requests.append(request)
            if device is None:
                if request.startswith("host-serial:"):
                    self._host_serial(sock, request)
                    return
                if not request.startswith("host:"):
                    sock.sendall(b"FAIL" + _block(f"unknown host service '{request}'"))
                    return
                device = self._host(sock, request[5:])
                if device is None:
                    return
                continue
            self._device_service(sock, device, request)
            return

    def _fail(self, sock: socket.socket, message: str) -> None:
        sock.sendall(b"FAIL" + _block(message))

    def _find(self, sock: socket.socket, selector: str) -> SimulatedDevice | None:
        online = [d for d in self.devices.values() if d.online]
        if selector in ("any", "local"):
            pool = [d for d in online if selector == "any" or d.serial.startswith("emulator-")]
            if len(pool) != 1:
                self._fail(
                    sock, "no devices/emulators found" if not pool else "more than one device/emulator"
                )
                return None
            return pool[0]
        if selector.startswith("id:"):
            for serial in self.devices:
                if str(self._transport_id(serial)) == selector[3:]:
                    selector = serial
        found = self.devices.get(selector)
        if found is None:
            self._fail(sock, f"device '{selector}' not found")
            return None
        if not found.online:
            self._fail(sock, f"device offline (serial '{selector}')")
            return None
        return found

    def _host(self, sock: socket.socket, service: str) -> SimulatedDevice | None:
        """A host service; returns the device when the connection switched to it."""
        if service == "version":
            sock.sendall(b"OKAY" + _block(f"{VERSION:04x}"))
            return None
        if service in ("devices", "devices-l"):
            lines = []
            for serial, dev in self.devices.items():
                state = "device" if dev.online else "offline"
                line = f"{serial}\t{state}"
                if service == "devices-l":
                    line = (
                        f"{serial:<22}{state} product:{dev.model} model:{dev.model.replace(' ', '_')} "
                        f"device:emu64xa transport_id:{self._transport_id(serial)}"
                    )
                lines.append(line + "\n")
            sock.sendall(b"OKAY" + _block("".join(lines)))
            return None
        if service == "kill":
            sock.sendall(b"OKAY")
            return None
        selector: str | None = None
        tport = False
        if service.startswith("transport:"):
            selector = service[len("transport:") :]
        elif service in ("transport-any", "transport-local"):
            selector = service.split("-", 1)[1]
        elif service.startswith("transport-id:"):
            selector = "id:" + service[len("transport-id:") :]
        elif service.startswith("tport:"):
            tport = True
            rest = service[len("tport:") :]
            selector = rest[len("serial:") :] if rest.startswith("serial:") else rest
        if selector is None:
            self._fail(sock, f"unknown host service '{service}'")
            return None
        device = self._find(sock, selector)
        if device is None:
            return None
        sock.sendall(b"OKAY" + (struct.pack("<Q", self._transport_id(device.serial)) if tport else b""))
        return device

    def _host_serial(self, sock: socket.socket, request: str) -> None:
        rest = request[len("host-serial:") :]
        serial = next((s for s in self.devices if rest.startswith(s + ":")), rest.rsplit(":", 1)[0])
        command = rest[len(serial) + 1 :]
        device = self._find(sock, serial)
        if device is None:
            return
        answers = {
            "features": FEATURES,
            "get-state": "device",
            "get-serialno": device.serial,
            "get-devpath": "emulator" if serial.startswith("emulator-") else "usb:1-1",
        }
        if command not in answers:
            self._fail(sock, f"unknown host service '{command}'")
            return
        sock.sendall(b"OKAY" + _block(answers[command]))

    def _device_service(self, sock: socket.socket, device: SimulatedDevice, request: str) -> None:
        if request.startswith("shell,v2") or request.startswith("shell:") or request.startswith("exec:"):
            head, _, command = request.partition(":")
            if head.startswith("shell") and not command:
                self._fail(sock, "interactive shells are not served by this device")
                return
            sock.sendall(b"OKAY")
            if head.startswith("shell,v2"):
                self._shell_v2(sock, device, command)
            else:
                result = run_shell(device, command, lambda: _read_to_eof(sock))
                sock.sendall(result.stdout + result.stderr)
            sock.shutdown(socket.SHUT_WR)
            return
        # What adbd does with a service it does not offer: the stream is refused.
        self._fail(sock, "closed")

    def _shell_v2(self, sock: socket.socket, device: SimulatedDevice, command: str) -> None:
        def stdin() -> bytes:
            data = b""
            while True:
                header = _recv_exact(sock, 5)
                size = struct.unpack("<I", header[1:])[0]
                payload = _recv_exact(sock, size) if size else b""
                if header[0] == 0:
                    data += payload
                elif header[0] == 4:
                    return data

        result = run_shell(device, command, stdin)
        for packet_id, payload in ((1, result.stdout), (2, result.stderr)):
            if payload:
                sock.sendall(bytes([packet_id]) + struct.pack("<I", len(payload)) + payload)
        sock.sendall(bytes([3]) + struct.pack("<I", 1) + bytes([result.code & 0xFF]))


def _read_to_eof(sock: socket.socket) -> bytes:
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
