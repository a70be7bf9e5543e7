"""Screen capture with the pointer drawn, on one X connection kept for the process lifetime.

All X work (mss grab, XFixes cursor, pointer and size queries) runs on one dedicated thread:
the X client libraries are not thread-safe, and the event loop must never block on a grab or
a PNG encode. Opening a connection per screenshot (as OSWorld's server does) exhausts the X
server's client table after a few hundred calls; this module opens exactly two, once.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["ScreenCapture"]


class ScreenCapture:
    """PNG screenshots (cursor composited at its hotspot), pointer position, screen size."""

    def __init__(self, *, compress_level: int = 1) -> None:
        self.compress_level = compress_level
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="x-capture")
        self._mss: Any = None
        self._display: Any = None
        self._closed = False

    def _open(self) -> None:
        if self._mss is not None:
            return
        if not _has_xauthority():
            os.environ["XAUTHORITY"] = "/dev/null"
        import mss
        from Xlib import display as xdisplay

        self._display = xdisplay.Display()
        self._mss = mss.MSS(with_cursor=True)

    def _png(self) -> bytes:
        import numpy as np

        from core.png import encode_png

        self._open()
        shot = self._mss.grab(self._mss.monitors[1])
        bgra = np.frombuffer(shot.bgra, np.uint8).reshape(shot.height, shot.width, 4)
        return encode_png(bgra[:, :, 2::-1], level=self.compress_level)

    def _pointer(self) -> tuple[int, int]:
        self._open()
        reply = self._display.screen().root.query_pointer()
        return int(reply.root_x), int(reply.root_y)

    def _size(self) -> tuple[int, int]:
        self._open()
        screen = self._display.screen()
        return int(screen.width_in_pixels), int(screen.height_in_pixels)

    async def png(self) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._png)

    async def pointer(self) -> tuple[int, int]:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._pointer)

    async def size(self) -> tuple[int, int]:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._size)

    def _close(self) -> None:
        if self._mss is not None:
            self._mss.close()
            self._mss = None
        if self._display is not None:
            self._display.close()
            self._display = None

    async def close(self) -> None:
        """Close the X connections; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._pool, self._close)
        self._pool.shutdown(wait=True)


def _has_xauthority() -> bool:
    """python-xlib refuses to connect when no Xauthority file exists; Xvfb needs none."""
    path = os.environ.get("XAUTHORITY") or os.path.expanduser("~/.Xauthority")
    return os.path.exists(path)
