"""Screenshots decoded once: full pixels for the zoom, a downscaled copy for the model.

Decoding a 1920x1080 PNG is the largest single cost of narrating a step, so each
screenshot is decoded once (OpenCV straight into an RGB array, no Pillow round trip) and a
rollout's after-screenshot is handed back by `FrameMemo` as the next step's before. The
copy shown to models is shrunk with bilinear interpolation, first box-averaged by an
integer factor when the ratio is above 2, so every source pixel still counts (for ratios up
to 2 bilinear is within a grey level or two of area averaging, at a fifth of its cost).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict

import cv2
import numpy as np
from PIL import Image

from core.images import decode_png
from core.png import PngBands

__all__ = ["Frame", "FrameMemo", "decode_rgb", "digest", "load_frame", "shrink"]

_DECODE_FLAGS = cv2.IMREAD_COLOR_RGB | cv2.IMREAD_IGNORE_ORIENTATION


def digest(data: bytes) -> str:
    """SHA-256 hex of a file's bytes: the identity of a screenshot in caches and narratives."""
    return hashlib.sha256(data).hexdigest()


def decode_rgb(data: bytes) -> np.ndarray:
    """An image file as a (height, width, 3) RGB array (alpha dropped, as Pillow's
    ``convert("RGB")`` does). Formats OpenCV cannot read go through Pillow, which raises
    a clear error for data that is no image."""
    arr = cv2.imdecode(np.frombuffer(data, np.uint8), _DECODE_FLAGS) if data else None
    if arr is None or arr.ndim != 3 or arr.dtype != np.uint8:
        img = decode_png(data)
        arr = np.asarray(img.convert("RGB") if img.mode != "RGB" else img)
    return arr


def shrink(arr: np.ndarray, longest_side: int | None) -> np.ndarray:
    """`arr` with its longer side at most `longest_side` (never enlarged; returned as is
    when it already fits)."""
    h, w = arr.shape[:2]
    if not longest_side or max(h, w) <= longest_side:
        return arr
    ratio = longest_side / max(h, w)
    size = (max(1, round(w * ratio)), max(1, round(h * ratio)))
    factor = math.ceil(1 / ratio / 2)  # box-average by this first, so bilinear shrinks by <= 2
    if factor > 1 and w // factor >= size[0] and h // factor >= size[1]:
        arr = cv2.resize(arr, (w // factor, h // factor), interpolation=cv2.INTER_AREA)
    return cv2.resize(arr, size, interpolation=cv2.INTER_LINEAR)


class Frame:
    """A screenshot decoded once: its full pixels, the copy models are shown (both RGB
    arrays), and that copy's PNG, compressed once (lazily) and patched for marked or
    outlined variants. `full` and `small` give them as Pillow images."""

    __slots__ = ("_bands", "_lock", "digest", "level", "pixels", "shown")

    def __init__(self, full: np.ndarray | Image.Image, small: np.ndarray | Image.Image | None,
                 digest: str, level: int = 1) -> None:
        self.pixels = _rgb_array(full)
        self.shown = self.pixels if small is None or small is full else _rgb_array(small)
        self.digest = digest
        self.level = level
        self._bands: PngBands | None = None
        self._lock = threading.Lock()

    @property
    def downscaled(self) -> bool:
        return self.shown is not self.pixels

    @property
    def size(self) -> tuple[int, int]:
        """Full (width, height)."""
        return self.pixels.shape[1], self.pixels.shape[0]

    @property
    def shown_size(self) -> tuple[int, int]:
        return self.shown.shape[1], self.shown.shape[0]

    @property
    def full(self) -> Image.Image:
        """The full screenshot as a (new) Pillow image."""
        return Image.fromarray(self.pixels)

    @property
    def small(self) -> Image.Image:
        """The copy models are shown as a (new) Pillow image."""
        return Image.fromarray(self.shown)

    @property
    def scale(self) -> float:
        """Size of the shown copy relative to the full screenshot (1.0 when not downscaled)."""
        return self.shown.shape[1] / self.pixels.shape[1]

    @property
    def bands(self) -> PngBands:
        with self._lock:
            if self._bands is None:
                self._bands = PngBands(self.shown, level=self.level)
            return self._bands


def _rgb_array(img: np.ndarray | Image.Image) -> np.ndarray:
    if isinstance(img, Image.Image):
        return np.asarray(img if img.mode == "RGB" else img.convert("RGB"))
    return img


def load_frame(png: bytes, longest_side: int | None, *, known_digest: str | None = None, level: int = 1) -> Frame:
    """Decode `png` (to RGB) and make its downscaled copy."""
    pixels = decode_rgb(png)
    return Frame(pixels, shrink(pixels, longest_side), known_digest or digest(png), level)


class FrameMemo:
    """The last few decoded frames by content hash, so a screenshot shared by two
    transitions (after of step i, before of step i+1) is decoded once. One memo per
    rollout; safe to call from worker threads."""

    def __init__(self, longest_side: int | None, capacity: int = 2, *, level: int = 1) -> None:
        self.longest_side = longest_side
        self.level = level
        self.capacity = max(1, capacity)
        self._frames: OrderedDict[str, Frame] = OrderedDict()
        self._lock = threading.Lock()
        self.decodes = 0

    def get(self, png: bytes, *, known_digest: str | None = None) -> Frame:
        key = known_digest or digest(png)
        with self._lock:
            frame = self._frames.get(key)
            if frame is None:
                frame = load_frame(png, self.longest_side, known_digest=key, level=self.level)
                self.decodes += 1
                self._frames[key] = frame
                while len(self._frames) > self.capacity:
                    self._frames.popitem(last=False)
            else:
                self._frames.move_to_end(key)
            return frame
