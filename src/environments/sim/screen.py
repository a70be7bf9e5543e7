"""The simulated screen: a small PNG whose pixels depend on what happened on it.

A real screenshot is a 1920x1080 PNG of a few hundred kilobytes; decoding, diffing and
re-encoding thousands of them would make a simulated benchmark measure Pillow instead of
the runner. A simulated screen is 48x27 pixels (the screen's aspect), one colour per
state, with a band of pixels spelling the state's digest, so no two states of a run look
alike (the narrator's fact cache, keyed by screenshot content, then works as on real
screens: a hit only for a transition really seen before).
"""

from __future__ import annotations

import hashlib
import struct
import zlib

__all__ = ["SIM_SCREEN_SIZE", "screen_png"]

#: Pixels of a simulated screenshot (the screen itself is `environment.width` x `height`).
SIM_SCREEN_SIZE = (48, 27)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def screen_png(state: str) -> bytes:
    """The PNG of a screen in `state` (any text naming the state)."""
    width, height = SIM_SCREEN_SIZE
    digest = hashlib.blake2b(state.encode(), digest_size=24).digest()
    background = bytes(digest[:3])
    band = digest  # 24 bytes = 8 pixels of RGB in the top row
    rows = []
    for y in range(height):
        row = bytearray(background * width)
        if y == 0:
            row[: len(band)] = band
        rows.append(b"\x00" + bytes(row))
    raw = zlib.compress(b"".join(rows), 6)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", raw) + _chunk(b"IEND", b"")
