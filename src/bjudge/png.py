"""A fast PNG writer for screenshots shown to models.

Pillow chooses a filter per row by trying them all, which costs more than the
compression itself at zlib level 1. Screens are mostly flat colour and vertical
structure, so one vectorised "Up" filter for every row compresses about as well (within
a few percent on desktop screens) in less than half the time. The output is a plain,
valid 8-bit PNG.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
from PIL import Image

__all__ = ["encode_png_fast"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOUR_TYPES = {"L": 0, "RGB": 2, "RGBA": 6}
_UP = 2


def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def encode_png_fast(img: Image.Image, *, level: int = 1) -> bytes:
    """PNG bytes of an L, RGB or RGBA image (other modes are converted to RGB)."""
    if img.mode not in _COLOUR_TYPES:
        img = img.convert("RGB")
    arr = np.asarray(img, dtype=np.uint8)
    height, width = arr.shape[:2]
    rows = arr.reshape(height, -1)
    filtered = np.empty((height, rows.shape[1] + 1), np.uint8)
    filtered[:, 0] = _UP
    filtered[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])  # wraps modulo 256, as PNG requires
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOUR_TYPES[img.mode], 0, 0, 0)
    data = zlib.compress(filtered.tobytes(), level)
    return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")
