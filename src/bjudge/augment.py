"""Visual augmentation of one transition (before, action, after), as the narrator sees it.

Pointer actions need pixel-level evidence, so the before-screenshot gets a labelled marker
where the pointer acted (Click red, MoveTo blue, DragTo green with a line from its MoveTo)
and the after-screenshot gets a fixed-size square crop around the final pointer position,
enlarged, with the crop outlined in the full picture. Actions without a pointer (typing,
hotkeys, code-agent steps) get the same square where the screen changed most between
before and after, from the pixel difference, so fine text they changed is seen at full
resolution too (our step beyond the paper, against its fine-text failures); a step that
changed nothing gets no zoom.

Speed (about 15 ms a step at 1920x1080 on two cores, over half of it decoding the new
screenshot; see benchmarks/augment.py): screens are decoded once per rollout (`frames`);
markers and outlines are drawn on the copy the model is shown, at scaled coordinates, and
only on the strip of rows they touch, never on a full copy; the crop is cut from the full
pixels and enlarged by OpenCV; the shown copy's PNG is compressed once and its marked or
outlined variants re-compress only the bands of rows that changed (`core.png.PngBands`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np
from PIL import Image

from core.images import Box, draw_marker, zoom_box
from core.png import encode_png
from core.trajectory import PointerEvent

from .config import AugmentConfig
from .frames import Frame, FrameMemo, digest, load_frame

__all__ = [
    "AugmentedTransition",
    "Frame",
    "FrameMemo",
    "augment",
    "augment_transition",
    "changed_box",
    "digest",
    "load_frame",
    "marker_label",
]

_RESAMPLE = {
    "nearest": cv2.INTER_NEAREST_EXACT,
    "bilinear": cv2.INTER_LINEAR,
    "bicubic": cv2.INTER_CUBIC,
}
_LABELS = {"click": "Click", "move": "MoveTo", "drag": "DragTo"}
#: Rows a marker may reach above and below its centre, beyond its radius (label, line ends).
_ABOVE, _BELOW = 24, 8


def marker_label(kind: str) -> str:
    return _LABELS[kind]


@dataclass(frozen=True, slots=True)
class AugmentedTransition:
    """What the narrator is shown for one transition, as PNG bytes."""

    before: bytes
    """The before-screenshot, downscaled, with a marker per pointer event."""
    after: bytes
    """The after-screenshot, downscaled, with the zoomed region outlined (if any)."""
    zoom: bytes | None
    """The enlarged crop around the final pointer position, or where the screen changed
    most for a step without a pointer; None when neither applies."""
    zoom_box: Box | None
    """Where the crop was cut, in full-screen pixels."""
    size: tuple[int, int]
    """Full screen size of the after-screenshot."""
    zoom_on: Literal["pointer", "change"] | None = None
    """What the zoom is centred on."""


def _clip(x: float, y: float, size: tuple[int, int]) -> tuple[int, int]:
    w, h = size
    return min(max(round(x), 0), w - 1), min(max(round(y), 0), h - 1)


def _mark(frame: Frame, events: Sequence[PointerEvent], cfg: AugmentConfig) -> tuple[int, np.ndarray]:
    """(first row, rows) of the shown copy with a marker per event drawn on them: only the
    full-width strip of rows the markers can reach is copied and drawn on, with the same
    result as drawing on the whole copy (the strip's margins keep every clip and the label's
    placement as they would be there)."""
    scale = frame.scale
    height = frame.shown.shape[0]
    points = []
    for event in events:
        x, y = _clip(event.x, event.y, frame.size)
        points.append((x * scale, y * scale, event.kind))
    rows = [min(max(round(sy), 0), height - 1) for _, sy, _ in points]
    top = max(0, min(rows) - cfg.marker_radius - _ABOVE)
    bottom = min(height, max(rows) + cfg.marker_radius + _BELOW)
    strip = Image.fromarray(frame.shown[top:bottom])
    previous: tuple[float, float, str] | None = None
    for sx, sy, kind in points:
        line_from = (previous[0], previous[1] - top) if kind == "drag" and previous else None
        strip = draw_marker(strip, sx, sy - top, kind, label=marker_label(kind),  # type: ignore[arg-type]
                            radius=cfg.marker_radius, line_from=line_from)
        if line_from is not None and previous is not None:
            # the line ends at the MoveTo centre; draw that marker again on top of it
            strip = draw_marker(strip, previous[0], previous[1] - top, previous[2],  # type: ignore[arg-type]
                                label=marker_label(previous[2]), radius=cfg.marker_radius)
        previous = (sx, sy, kind)
    return top, np.asarray(strip)


def _scaled_box(box: Box, scale: float, size: tuple[int, int]) -> Box:
    w, h = size
    left, top = min(round(box.left * scale), w - 1), min(round(box.top * scale), h - 1)
    right = min(max(round(box.right * scale), left + 1), w)
    bottom = min(max(round(box.bottom * scale), top + 1), h)
    return Box(left, top, right, bottom)


def _outline(frame: Frame, box: Box, colour: tuple[int, int, int], width: int) -> tuple[int, np.ndarray]:
    """(first row, rows) of the shown copy with `box` outlined inside its edge, as
    `core.images.draw_outline` draws it, on a copy of the box's rows only."""
    rows = frame.shown[box.top:box.bottom].copy()
    paint = np.asarray(colour, np.uint8)
    rows[:width, box.left:box.right] = paint
    rows[-width:, box.left:box.right] = paint
    rows[:, box.left:box.left + width] = paint
    rows[:, max(box.right - width, box.left):box.right] = paint
    return box.top, rows


def _zoom(frame: Frame, box: Box, cfg: AugmentConfig) -> bytes:
    """The crop cut from the full pixels, enlarged, as PNG."""
    crop = frame.pixels[box.top:box.bottom, box.left:box.right]
    if cfg.zoom_scale != 1.0:
        size = (round(box.width * cfg.zoom_scale), round(box.height * cfg.zoom_scale))
        crop = cv2.resize(crop, size, interpolation=_RESAMPLE[cfg.zoom_resample])
    return encode_png(crop, level=cfg.png_level)


def changed_box(before: Frame, after: Frame, size: int, threshold: int) -> Box | None:
    """The `size`-pixel square of the after-screenshot holding the most pixels that differ
    from the before-screenshot by more than `threshold` (on any channel); None when the
    screens differ in size or nowhere. Counted on a grid of cells a tenth of the square,
    so a 1080p screen costs tens of milliseconds."""
    if before.size != after.size:
        return None
    diff = cv2.absdiff(before.pixels, after.pixels)
    red, green, blue = cv2.split(diff)
    _, changed = cv2.threshold(cv2.max(cv2.max(red, green), blue), threshold, 255, cv2.THRESH_BINARY)
    if not cv2.countNonZero(changed):
        return None
    w, h = after.size
    cell = max(1, size // 10)
    # averaged in floating point, so a change of a few pixels (a minus sign) still counts
    cells = cv2.resize(changed.astype(np.float32), (max(1, w // cell), max(1, h // cell)),
                       interpolation=cv2.INTER_AREA)
    span = max(1, size // cell)
    sums = cv2.boxFilter(cells, -1, (span, span), normalize=False, borderType=cv2.BORDER_CONSTANT)
    cy, cx = np.unravel_index(int(np.argmax(sums)), sums.shape)
    first = zoom_box(w, h, (cx + 0.5) * w / cells.shape[1], (cy + 0.5) * h / cells.shape[0], size)
    # centred on the changed pixels inside that square, not on whichever window found them first
    moments = cv2.moments(changed[first.top:first.bottom, first.left:first.right], binaryImage=True)
    if not moments["m00"]:
        return first
    return zoom_box(w, h, first.left + moments["m10"] / moments["m00"], first.top + moments["m01"] / moments["m00"], size)


def _zoomed(before_png: bytes, after: Frame, box: Box, cfg: AugmentConfig,
            on: Literal["pointer", "change"]) -> AugmentedTransition:
    outline = _scaled_box(box, after.scale, after.shown_size)
    outlined = after.bands.png_patched(*_outline(after, outline, cfg.outline_colour, max(1, cfg.outline_width)))
    return AugmentedTransition(before=before_png, after=outlined, zoom=_zoom(after, box, cfg), zoom_box=box,
                               size=after.size, zoom_on=on)


def augment(before: Frame, after: Frame, pointer: Sequence[PointerEvent], cfg: AugmentConfig) -> AugmentedTransition:
    """Mark, zoom, outline and encode one transition (blocking: call it in a thread)."""
    if not pointer:
        box = changed_box(before, after, cfg.zoom_size, cfg.change_threshold) if cfg.change_zoom else None
        if box is None:
            return AugmentedTransition(before=before.bands.png(), after=after.bands.png(), zoom=None,
                                       zoom_box=None, size=after.size)
        return _zoomed(before.bands.png(), after, box, cfg, "change")
    marked = before.bands.png_patched(*_mark(before, pointer, cfg))
    last = pointer[-1]
    x, y = _clip(last.x, last.y, after.size)
    return _zoomed(marked, after, zoom_box(after.size[0], after.size[1], x, y, cfg.zoom_size), cfg, "pointer")


def augment_transition(before_png: bytes, after_png: bytes, pointer: Sequence[PointerEvent],
                       cfg: AugmentConfig | None = None) -> AugmentedTransition:
    """`augment` straight from PNG bytes, e.g. for a report showing what the narrator saw
    (blocking: call it in a thread)."""
    cfg = cfg or AugmentConfig()
    memo = FrameMemo(cfg.longest_side, level=cfg.png_level)
    return augment(memo.get(before_png), memo.get(after_png), pointer, cfg)
