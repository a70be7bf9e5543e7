"""Visual augmentation of one transition (before, action, after), as the narrator sees it.

Pointer actions need pixel-level evidence, so the before-screenshot gets a labelled marker
where the pointer acted (Click red, MoveTo blue, DragTo green with a line from its MoveTo)
and the after-screenshot gets a fixed-size square crop around the final pointer position,
enlarged, with the crop outlined in the full picture. Actions without a pointer get
neither zoom nor outline.

Speed: each screenshot is decoded once into a `Frame` (full pixels plus the downscaled
copy the model is shown); a rollout's after-screenshot is the next step's before, so
`FrameMemo` hands the same `Frame` back. Markers and outlines are drawn on the small copy,
the crop is cut from the full one, and PNGs are written at zlib level 1 with one
vectorised row filter; each screen is compressed once and its marked or outlined
variants re-compress only the rows that changed (`png.PngBands`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image

from core.images import Box, decode_png, draw_marker, draw_outline, zoom_box
from core.trajectory import PointerEvent

from .config import AugmentConfig
from .png import PngBands, encode_png_fast

__all__ = [
    "AugmentedTransition",
    "Frame",
    "FrameMemo",
    "augment",
    "augment_transition",
    "digest",
    "load_frame",
    "marker_label",
]

_RESAMPLE = {
    "nearest": Image.Resampling.NEAREST,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
}
_LABELS = {"click": "Click", "move": "MoveTo", "drag": "DragTo"}


def digest(data: bytes) -> str:
    """SHA-256 hex of a file's bytes: the identity of a screenshot in caches and narratives."""
    return hashlib.sha256(data).hexdigest()


def marker_label(kind: str) -> str:
    return _LABELS[kind]


class Frame:
    """A screenshot decoded once: its full pixels, the copy models are shown, and that
    copy's PNG, compressed once (lazily) and patched for marked or outlined variants."""

    __slots__ = ("_bands", "_lock", "digest", "full", "level", "small")

    def __init__(self, full: Image.Image, small: Image.Image, digest: str, level: int = 1) -> None:
        self.full = full
        self.small = small
        self.digest = digest
        self.level = level
        self._bands: PngBands | None = None
        self._lock = threading.Lock()

    @property
    def scale(self) -> float:
        """Size of `small` relative to `full` (1.0 when not downscaled)."""
        return self.small.width / self.full.width

    @property
    def bands(self) -> PngBands:
        with self._lock:
            if self._bands is None:
                self._bands = PngBands(self.small, level=self.level)
            return self._bands


def _shrink(img: Image.Image, longest_side: int | None) -> Image.Image:
    """Area-averaging downscale (OpenCV's, several times faster than Pillow's Lanczos and
    as legible for screen text); never enlarges."""
    if not longest_side or max(img.size) <= longest_side:
        return img
    ratio = longest_side / max(img.size)
    size = (max(1, round(img.width * ratio)), max(1, round(img.height * ratio)))
    small = cv2.resize(np.asarray(img), size, interpolation=cv2.INTER_AREA)
    return Image.fromarray(small, mode=img.mode)


def load_frame(png: bytes, longest_side: int | None, *, known_digest: str | None = None, level: int = 1) -> Frame:
    """Decode `png` (to RGB) and make its downscaled copy."""
    img = decode_png(png)
    if img.mode != "RGB":
        img = img.convert("RGB")
    return Frame(full=img, small=_shrink(img, longest_side), digest=known_digest or digest(png), level=level)


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


@dataclass(frozen=True, slots=True)
class AugmentedTransition:
    """What the narrator is shown for one transition, as PNG bytes."""

    before: bytes
    """The before-screenshot, downscaled, with a marker per pointer event."""
    after: bytes
    """The after-screenshot, downscaled, with the zoomed region outlined (if any)."""
    zoom: bytes | None
    """The enlarged crop around the final pointer position; None without a pointer."""
    zoom_box: Box | None
    """Where the crop was cut, in full-screen pixels."""
    size: tuple[int, int]
    """Full screen size of the after-screenshot."""


def _clip(x: float, y: float, size: tuple[int, int]) -> tuple[int, int]:
    w, h = size
    return min(max(round(x), 0), w - 1), min(max(round(y), 0), h - 1)


def _mark(frame: Frame, events: Sequence[PointerEvent], cfg: AugmentConfig) -> Image.Image:
    img = frame.small
    scale = frame.scale
    if not events:
        return img
    previous: tuple[float, float, str] | None = None
    for event in events:
        x, y = _clip(event.x, event.y, frame.full.size)
        sx, sy = x * scale, y * scale
        line_from = previous[:2] if event.kind == "drag" and previous else None
        img = draw_marker(img, sx, sy, event.kind, label=marker_label(event.kind),
                          radius=cfg.marker_radius, line_from=line_from)
        if line_from is not None and previous is not None:
            # the line ends at the MoveTo centre; draw that marker again on top of it
            img = draw_marker(img, previous[0], previous[1], previous[2], label=marker_label(previous[2]),  # type: ignore[arg-type]
                              radius=cfg.marker_radius)
        previous = (sx, sy, event.kind)
    return img


def _scaled_box(box: Box, scale: float, size: tuple[int, int]) -> Box:
    w, h = size
    left, top = min(round(box.left * scale), w - 1), min(round(box.top * scale), h - 1)
    right = min(max(round(box.right * scale), left + 1), w)
    bottom = min(max(round(box.bottom * scale), top + 1), h)
    return Box(left, top, right, bottom)


def augment(before: Frame, after: Frame, pointer: Sequence[PointerEvent], cfg: AugmentConfig) -> AugmentedTransition:
    """Mark, zoom, outline and encode one transition (blocking: call it in a thread)."""
    marked = _mark(before, pointer, cfg)
    zoom_png: bytes | None = None
    box: Box | None = None
    shown_after = after.small
    if pointer:
        last = pointer[-1]
        x, y = _clip(last.x, last.y, after.full.size)
        box = zoom_box(after.full.width, after.full.height, x, y, cfg.zoom_size)
        crop = after.full.crop((box.left, box.top, box.right, box.bottom))
        if cfg.zoom_scale != 1.0:
            size = (round(box.width * cfg.zoom_scale), round(box.height * cfg.zoom_scale))
            crop = crop.resize(size, _RESAMPLE[cfg.zoom_resample])
        zoom_png = encode_png_fast(crop, level=cfg.png_level)
        outline = _scaled_box(box, after.scale, after.small.size)
        width = max(1, round(cfg.outline_width))
        shown_after = draw_outline(after.small, outline, colour=cfg.outline_colour, width=width)
    return AugmentedTransition(
        before=before.bands.png_of(marked) if pointer else before.bands.png(),
        after=after.bands.png_of(shown_after) if pointer else after.bands.png(),
        zoom=zoom_png,
        zoom_box=box,
        size=after.full.size,
    )


def augment_transition(before_png: bytes, after_png: bytes, pointer: Sequence[PointerEvent],
                       cfg: AugmentConfig | None = None) -> AugmentedTransition:
    """`augment` straight from PNG bytes, e.g. for a report showing what the narrator saw
    (blocking: call it in a thread)."""
    cfg = cfg or AugmentConfig()
    memo = FrameMemo(cfg.longest_side, level=cfg.png_level)
    return augment(memo.get(before_png), memo.get(after_png), pointer, cfg)
