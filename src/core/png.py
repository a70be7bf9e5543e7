"""PNG, the project's one place for it: screenshots and the pictures shown to models are
written here, in a fraction of Pillow's time at about the same size, and read back.

Three savings over Pillow's encoder, which dominated the cost of serving a screenshot and
of narrating a step:

- one vectorised "Up" filter for every row instead of trying every filter per row (as
  small on screens, in less than half the time);
- deflate by ISA-L (the `isal` package, a dependency) at levels 1-3: several times faster
  than zlib at a similar size; zlib for levels 0 and 4-9;
- `PngBands`: a screen is compressed once, in bands of rows that are each compressed
  independently (a full flush between bands resets the deflate dictionary, as parallel
  gzip tools do). A copy of that screen with a marker or an outline drawn on it differs in
  a few rows, so only the bands holding those rows are compressed again.

Images are Pillow images or ``(height, width[, channels])`` uint8 arrays; the output is a
plain, valid 8-bit PNG that any reader, OSWorld's client included, accepts.
"""

from __future__ import annotations

import io
import struct
import zlib
from types import ModuleType
from typing import Any

import numpy as np
from isal import isal_zlib
from PIL import Image

__all__ = ["BAND_ROWS", "DEFLATE_BACKEND", "PngBands", "decode_png", "encode_png"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOUR_TYPES = {1: 0, 3: 2, 4: 6}  # channels -> PNG colour type (grey, RGB, RGBA)
_UP = 2
#: Rows per independently compressed band.
BAND_ROWS = 32
#: An empty final deflate block: ends a stream made of flushed bands.
_FINAL_BLOCK = b"\x03\x00"
#: Which library deflates at the default level 1.
DEFLATE_BACKEND = "isal"

Pixels = Image.Image | np.ndarray


def _deflater(level: int) -> tuple[ModuleType, int]:
    """(module, level) compressing at zlib-style `level`: ISA-L at 1-3, zlib elsewhere."""
    if 1 <= level <= 3:
        return isal_zlib, level
    return zlib, level


def _adler32(data: bytes | np.ndarray, value: int = 1) -> int:
    return int(isal_zlib.adler32(data, value))


def _array(img: Pixels) -> np.ndarray:
    """`img` as a C-contiguous (height, width, channels) uint8 array with 1, 3 or 4
    channels (other Pillow modes are converted to RGB)."""
    if isinstance(img, Image.Image):
        if img.mode not in ("L", "RGB", "RGBA"):
            img = img.convert("RGB")
        img = np.asarray(img)
    arr = np.ascontiguousarray(img, dtype=np.uint8)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in _COLOUR_TYPES:
        raise ValueError(f"cannot write a PNG of an array shaped {arr.shape}")
    return arr


def _filter(rows: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
    """Up-filtered scanlines (filter byte first) of (n, stride) rows; `previous` is the
    row above the first."""
    out = np.empty((rows.shape[0], rows.shape[1] + 1), np.uint8)
    out[:, 0] = _UP
    if previous is None:
        out[0, 1:] = rows[0]
    else:
        np.subtract(rows[0], previous, out=out[0, 1:])  # uint8 wraps modulo 256
    np.subtract(rows[1:], rows[:-1], out=out[1:, 1:])
    return out


def _png(arr: np.ndarray, zparts: list[bytes]) -> bytes:
    """The PNG file around one zlib stream given in parts, joined once."""
    height, width, channels = arr.shape
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOUR_TYPES[channels], 0, 0, 0)
    size = sum(len(p) for p in zparts)
    crc = zlib.crc32(b"IDAT")
    for part in zparts:
        crc = zlib.crc32(part, crc)
    return b"".join([
        _SIGNATURE,
        struct.pack(">I", len(header)), b"IHDR", header, struct.pack(">I", zlib.crc32(b"IHDR" + header)),
        struct.pack(">I", size), b"IDAT", *zparts, struct.pack(">I", crc),
        b"\x00\x00\x00\x00IEND\xaeB`\x82",
    ])


def _zlib_header(level: int) -> bytes:
    """A valid zlib header (32 KiB window, no dictionary) with the level hint."""
    cmf = 0x78
    flevel = 0 if level < 2 else 1 if level < 6 else 2 if level == 6 else 3
    flg = flevel << 6
    flg += 31 - ((cmf << 8) + flg) % 31
    return bytes([cmf, flg])


def encode_png(img: Pixels, *, level: int = 1) -> bytes:
    """PNG bytes of an L, RGB or RGBA image or array (other modes are converted to RGB)."""
    arr = _array(img)
    data = _filter(arr.reshape(arr.shape[0], -1), None)
    module, lvl = _deflater(level)
    c: Any = module.compressobj(lvl, module.DEFLATED, -15)
    body = c.compress(data) + c.flush(module.Z_FINISH)
    return _png(arr, [_zlib_header(level), body, struct.pack(">I", _adler32(data))])


def _adler32_combine(first: int, second: int, second_length: int) -> int:
    """Adler-32 of two byte strings joined, from theirs (zlib's adler32_combine)."""
    base = 65521
    rem = second_length % base
    sum1 = first & 0xFFFF
    sum2 = (rem * sum1) % base
    sum1 += (second & 0xFFFF) + base - 1
    sum2 += ((first >> 16) & 0xFFFF) + ((second >> 16) & 0xFFFF) + base - rem
    sum1 %= base
    sum2 %= base
    return sum1 | (sum2 << 16)


Band = tuple[bytes, int, int]
"""(compressed bytes ending on a full flush, Adler-32 of the filtered rows, their length)."""


class PngBands:
    """The banded PNG of one image, and of copies of it that differ in a few rows."""

    def __init__(self, img: Pixels, *, level: int = 1) -> None:
        self.arr = _array(img)
        self.level = level
        self.rows = self.arr.reshape(self.arr.shape[0], -1)
        self.bands = self._compress(self.rows, 0, len(self.rows))
        self._png: bytes | None = None

    @property
    def img(self) -> Image.Image:
        """The image as Pillow sees it."""
        return Image.fromarray(self.arr[:, :, 0] if self.arr.shape[2] == 1 else self.arr)

    def _compress(self, rows: np.ndarray, start: int, stop: int) -> list[Band]:
        """Bands `start // BAND_ROWS` .. of `rows` (whole bands from `start` to `stop`),
        through one compressor flushed fully after each band."""
        module, lvl = _deflater(self.level)
        c: Any = module.compressobj(lvl, module.DEFLATED, -15)
        out: list[Band] = []
        for first in range(start, stop, BAND_ROWS):
            data = _filter(rows[first:first + BAND_ROWS], rows[first - 1] if first else None)
            out.append((c.compress(data) + c.flush(module.Z_FULL_FLUSH), _adler32(data), data.size))
        return out

    def _assemble(self, bands: list[Band]) -> bytes:
        check = bands[0][1]
        for _, adler, length in bands[1:]:
            check = _adler32_combine(check, adler, length)
        return _png(self.arr, [_zlib_header(self.level), *(b[0] for b in bands), _FINAL_BLOCK,
                               struct.pack(">I", check)])

    def png(self) -> bytes:
        """The image itself."""
        if self._png is None:
            self._png = self._assemble(self.bands)
        return self._png

    def png_patched(self, top: int, patch: np.ndarray) -> bytes:
        """PNG of this image with the rows from `top` on replaced by `patch`, an array of
        full-width rows (same width and channels). Only bands whose rows change (or whose
        first row sits under a changed row, as the Up filter makes it depend on it) are
        compressed again."""
        patch = np.ascontiguousarray(patch, dtype=np.uint8).reshape(patch.shape[0], -1)
        height = len(self.rows)
        if top < 0 or top + len(patch) > height or patch.shape[1] != self.rows.shape[1]:
            raise ValueError(f"a patch of {patch.shape} at row {top} does not fit a {self.arr.shape} image")
        changed = np.flatnonzero((patch != self.rows[top:top + len(patch)]).any(axis=1))
        if changed.size == 0:
            return self.png()
        first_row, last_row = top + int(changed[0]), top + int(changed[-1])
        first_band = first_row // BAND_ROWS
        last_band = min(last_row + 1, height - 1) // BAND_ROWS
        start, stop = first_band * BAND_ROWS, min((last_band + 1) * BAND_ROWS, height)
        # the variant's rows start..stop, plus the (unchanged or patched) row above them
        lo = max(start - 1, 0)
        rows = self.rows[lo:stop].copy()
        a, b = max(top, lo), min(top + len(patch), stop)
        rows[a - lo:b - lo] = patch[a - top:b - top]
        fresh = self._compress(rows, start - lo, stop - lo)
        return self._assemble([*self.bands[:first_band], *fresh, *self.bands[last_band + 1:]])

    def png_of(self, variant: Pixels) -> bytes:
        """PNG of `variant`, an image of the same size and mode drawn over this one."""
        arr = _array(variant)
        if arr.shape != self.arr.shape:
            return encode_png(arr, level=self.level)
        return self.png_patched(0, arr)


def decode_png(data: bytes) -> Image.Image:
    """The image of PNG bytes, as RGB (or RGBA when it has alpha)."""
    img = Image.open(io.BytesIO(data))
    img.load()
    return img.convert("RGB") if img.mode not in ("RGB", "RGBA") else img
