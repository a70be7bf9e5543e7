"""The local adb server and emulator console, checked against the protocol as documented,
then with the real `adbutils` client.

Protocol facts relied on (AOSP ``packages/modules/adb``: ``OVERVIEW.TXT``, ``SERVICES.TXT``,
``protocol.txt``; the emulator's console documentation):

1. A request is four ASCII hex digits giving the length, then the service name.
2. The reply is ``OKAY`` or ``FAIL``; FAIL is followed by a hex-length-prefixed message.
3. ``host:version`` replies OKAY + a length-prefixed 4-hex-digit version (``0029`` = 41).
4. ``host:devices`` replies OKAY + one length-prefixed block of ``serial\\tstate\\n`` lines;
   ``host:devices-l`` adds ``key:value`` fields such as ``transport_id:N``.
5. ``host:transport:<serial>`` replies OKAY and the connection is bound to that device; the
   next request on the same socket names a device service. ``host:tport:serial:<serial>``
   does the same but follows OKAY with the transport id as 8 little-endian bytes. An unknown
   serial is ``FAIL`` + ``device '<serial>' not found``.
6. ``host-serial:<serial>:features`` replies OKAY + a block listing features (``shell_v2`` ...).
7. ``shell:<cmd>`` (after a transport) replies OKAY then a raw stream until close, no exit
   status. ``shell,v2,raw:<cmd>`` frames output as [id:1][len:4 LE][data]: id 1 stdout,
   2 stderr, 3 exit status (1 byte). ``exec:<cmd>`` replies OKAY then raw bytes, unmodified.
8. The emulator console greets with a banner ending in ``OK``, wants ``auth <token>``
   (the token file's content) before other commands, ends replies with ``OK`` or ``KO: why``.
"""

from __future__ import annotations

import socket
import struct

import adbutils
import pytest
from adbutils.errors import AdbError

from testing.android import FakeFleet

pytestmark = pytest.mark.integration


def _send(sock: socket.socket, request: str) -> None:
    sock.sendall(f"{len(request):04x}{request}".encode())


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, f"closed after {len(data)} of {n} bytes"
        data += chunk
    return data


def _block(sock: socket.socket) -> str:
    return _read(sock, int(_read(sock, 4), 16)).decode()


def _until_close(sock: socket.socket) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def _conn(fleet: FakeFleet) -> socket.socket:
    return socket.create_connection(("127.0.0.1", fleet.server.port), timeout=5)


def test_version_and_device_list_follow_the_wire_format(fleet: FakeFleet) -> None:
    with _conn(fleet) as s:
        _send(s, "host:version")
        assert _read(s, 4) == b"OKAY"
        assert int(_block(s), 16) == 41
    with _conn(fleet) as s:
        _send(s, "host:devices")
        assert _read(s, 4) == b"OKAY"
        lines = _block(s).splitlines()
    assert lines == [f"{serial}\tdevice" for serial in fleet.serials]
    with _conn(fleet) as s:
        _send(s, "host:devices-l")
        assert _read(s, 4) == b"OKAY"
        first = _block(s).splitlines()[0].split()
    assert first[:2] == [fleet.serials[0], "device"] and "transport_id:1" in first


def test_transport_then_shell_v1_and_unknown_serial_fails(fleet: FakeFleet) -> None:
    with _conn(fleet) as s:
        _send(s, f"host:transport:{fleet.serials[1]}")
        assert _read(s, 4) == b"OKAY"
        _send(s, "shell:wm size")
        assert _read(s, 4) == b"OKAY"
        assert _until_close(s) == b"Physical size: 540x960\n"
    with _conn(fleet) as s:
        _send(s, "host:transport:emulator-1")
        assert _read(s, 4) == b"FAIL"
        assert _block(s) == "device 'emulator-1' not found"
    with _conn(fleet) as s:
        _send(s, "host:no-such-service")
        assert _read(s, 4) == b"FAIL" and "unknown host service" in _block(s)


def test_tport_returns_an_8_byte_transport_id_then_shell_v2_frames(fleet: FakeFleet) -> None:
    with _conn(fleet) as s:
        _send(s, f"host:tport:serial:{fleet.serials[2]}")
        assert _read(s, 4) == b"OKAY"
        assert struct.unpack("<Q", _read(s, 8))[0] == 3
        _send(s, "shell,v2,raw:settings get global wifi_on; cat /nope")
        assert _read(s, 4) == b"OKAY"
        frames: list[tuple[int, bytes]] = []
        while True:
            head = _read(s, 5)
            payload = _read(s, struct.unpack("<I", head[1:])[0])
            frames.append((head[0], payload))
            if head[0] == 3:
                break
    assert frames[0] == (1, b"1\n")
    assert frames[1] == (2, b"cat: /nope: No such file or directory\n")
    assert frames[2] == (3, b"\x01")


def test_exec_streams_an_unmodified_png_and_sync_is_refused(fleet: FakeFleet) -> None:
    with _conn(fleet) as s:
        _send(s, f"host:transport:{fleet.serials[0]}")
        assert _read(s, 4) == b"OKAY"
        _send(s, "exec:screencap -p")
        assert _read(s, 4) == b"OKAY"
        png = _until_close(s)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png.endswith(b"IEND\xaeB`\x82")
    with _conn(fleet) as s:
        _send(s, f"host:transport:{fleet.serials[0]}")
        assert _read(s, 4) == b"OKAY"
        _send(s, "sync:")
        assert _read(s, 4) == b"FAIL"


def test_host_serial_features_lists_shell_v2(fleet: FakeFleet) -> None:
    with _conn(fleet) as s:
        _send(s, f"host-serial:{fleet.serials[0]}:features")
        assert _read(s, 4) == b"OKAY"
        assert "shell_v2" in _block(s).split(",")


def test_real_adbutils_client_against_the_server(fleet: FakeFleet) -> None:
    client = adbutils.AdbClient(host="127.0.0.1", port=fleet.server.port)
    assert client.server_version() == 41
    assert [d.serial for d in client.device_list()] == fleet.serials
    dev = client.device(fleet.serials[0])
    assert dev.shell("getprop ro.kernel.qemu") == "1"
    ret = dev.shell2("settings get global airplane_mode_on && false", v2=True)
    assert (ret.returncode, ret.stdout) == (1, "0\n")
    assert dev.screenshot().size == (540, 960)
    with pytest.raises(AdbError, match="not found"):
        client.device("emulator-9").shell("true")
    # adbutils picks the newer transport request because the server reports version 41.
    assert f"host:tport:serial:{fleet.serials[0]}" in fleet.server.requests
    assert any(r.startswith("shell,v2:") for r in fleet.server.requests)


def _console_lines(s: socket.socket) -> list[str]:
    data = b""
    while not (data.endswith(b"OK\r\n") or b"KO:" in data.splitlines()[-1] if data else False):
        data += s.recv(4096)
    return data.decode().splitlines()


def test_console_wants_the_token_then_saves_and_loads_snapshots(fleet: FakeFleet) -> None:
    device, console = fleet.devices[0], fleet.consoles[0]
    token = fleet.token_path.read_text()
    with socket.create_connection(("127.0.0.1", console.port), timeout=5) as s:
        banner = _console_lines(s)
        assert banner[0] == "Android Console: Authentication required" and banner[-1] == "OK"
        s.sendall(b"avd snapshot save x\r\n")
        assert _console_lines(s)[-1].startswith("KO:")
        s.sendall(b"auth wrong\r\n")
        assert _console_lines(s)[-1].startswith("KO:")
        s.sendall(f"auth {token}\r\n".encode())
        assert _console_lines(s)[-1] == "OK"
        device.state.draft = "kept"
        s.sendall(b"avd snapshot save mine\r\n")
        assert _console_lines(s)[-1] == "OK"
        device.state.draft = "changed"
        s.sendall(b"avd snapshot load mine\r\n")
        assert _console_lines(s)[-1] == "OK"
        s.sendall(b"avd snapshot load missing\r\n")
        assert _console_lines(s)[-1].startswith("KO:")
    assert device.state.draft == "kept"
