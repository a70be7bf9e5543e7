"""A reference controller server that does, per request, what OSWorld's in-VM server does.

`env_step.py` starts it beside the project's server on the same desktop, so the ratios it
prints are measured in one run instead of divided by remembered figures. Per request
(../shared/reference/osworld.md §1.3-1.4):

- ``GET /screenshot``: ``pyautogui.screenshot()`` of the whole screen, the XFixes cursor
  image read on a fresh X connection and alpha-pasted with its top-left at the pointer,
  saved as PNG at Pillow's default level to a file, and the file sent back.
- ``POST /execute``: ``subprocess.run(command, capture_output, text, timeout=120)``, so a
  pyautogui action is a fresh interpreter importing pyautogui with its default 0.1 s pause.
- ``GET /terminal``: OSWorld's quick check through pyatspi (imported once, as its server
  does): a terminal's text is looked for only when gnome-terminal has an active window; with
  none, ``{"output": null}``. Without pyatspi (a host interpreter) it is not served.

OSWorld's image ships gnome-screenshot, which makes pyscreeze grab through Pillow; this
desktop may lack it, so the reference tells pyscreeze to take that same path.

    python benchmarks/osworld_reference.py PORT_FILE    (DISPLAY set to the desktop)
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pyautogui
import pyscreeze
from PIL import Image

try:
    import pyatspi
except ImportError:  # a virtualenv without Debian's GObject bindings: no /terminal
    pyatspi = None

pyautogui.PAUSE = 0  # OSWorld's server sets this for its own process (not for /execute children)
pyscreeze.GNOMESCREENSHOT_EXISTS = True  # the grab path OSWorld's image takes (see above)
_SHOT = Path(tempfile.mkdtemp(prefix="osworld-reference-")) / "screenshot.png"


class _CursorImage(ctypes.Structure):
    _fields_ = [
        ("x", ctypes.c_short),
        ("y", ctypes.c_short),
        ("width", ctypes.c_ushort),
        ("height", ctypes.c_ushort),
        ("xhot", ctypes.c_ushort),
        ("yhot", ctypes.c_ushort),
        ("cursor_serial", ctypes.c_ulong),
        ("pixels", ctypes.POINTER(ctypes.c_ulong)),
        ("atom", ctypes.c_ulong),
        ("name", ctypes.c_char_p),
    ]


_X11 = ctypes.CDLL("libX11.so.6")
_X11.XOpenDisplay.restype = ctypes.c_void_p
_X11.XOpenDisplay.argtypes = [ctypes.c_char_p]
_X11.XFree.argtypes = [ctypes.c_void_p]
_XFIXES = ctypes.CDLL("libXfixes.so.3")
_XFIXES.XFixesGetCursorImage.restype = ctypes.POINTER(_CursorImage)
_XFIXES.XFixesGetCursorImage.argtypes = [ctypes.c_void_p]


def _cursor() -> Image.Image:
    """The cursor as RGBA, read on a new X connection (OSWorld opens one per screenshot)."""
    display = _X11.XOpenDisplay(None)
    if not display:
        raise RuntimeError("cannot open the display")
    image = _XFIXES.XFixesGetCursorImage(display).contents
    count = image.width * image.height
    # Each pixel is an unsigned long holding 32-bit ARGB; little-endian bytes are B, G, R, A.
    argb = np.ctypeslib.as_array(image.pixels, shape=(count,)).astype(np.uint32)
    bgra = argb.view(np.uint8).reshape(image.height, image.width, 4)
    cursor = Image.fromarray(bgra[:, :, [2, 1, 0, 3]].copy(), "RGBA")
    _X11.XFree(ctypes.addressof(image))
    return cursor


def screenshot_png() -> bytes:
    shot = pyautogui.screenshot()
    cursor = _cursor()
    x, y = pyautogui.position()
    shot.paste(cursor, (x, y), cursor)
    shot.save(_SHOT)
    return _SHOT.read_bytes()


def execute(data: dict[str, object]) -> dict[str, object]:
    command = data.get("command", [])
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=120, shell=bool(data.get("shell"))
    )  # type: ignore[call-overload]
    return {
        "status": "success",
        "output": result.stdout,
        "error": result.stderr,
        "returncode": result.returncode,
    }


def terminal() -> dict[str, object]:
    """OSWorld's /terminal when no gnome-terminal window is active (its quick check)."""
    desktop = pyatspi.Registry.getDesktop(0)
    for app in desktop:
        if app.getRoleName() == "application" and app.name == "gnome-terminal-server":
            for frame in app:
                if frame.getRoleName() == "frame" and frame.getState().contains(pyatspi.STATE_ACTIVE):
                    raise RuntimeError("the reference reads no terminal text; close the terminal")
    return {"output": None, "status": "success"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def _reply(self, body: bytes, content_type: str, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/screenshot":
            self._reply(screenshot_png(), "image/png")
        elif self.path == "/terminal" and pyatspi is not None:
            self._reply(json.dumps(terminal()).encode(), "application/json")
        else:
            self._reply(b"{}", "application/json", 404)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/execute":
            self._reply(json.dumps(execute(json.loads(body or b"{}"))).encode(), "application/json")
        else:
            self._reply(b"{}", "application/json", 404)


def main(port_file: str) -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    Path(port_file).write_text(str(server.server_address[1]))
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("XDG_SESSION_TYPE", "x11")
    sys.exit(main(sys.argv[1]))
