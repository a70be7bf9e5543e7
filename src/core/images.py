"""Image helpers shared by the judge, the guide and reports: downscaling, pointer markers,
zoom crops and outlines (PNG encode/decode come from `core.png`, re-exported here).

Everything works on Pillow images in screen pixels; callers convert to PNG once at the end,
with a fast compression level, because encoding dominates the cost of a step's augmentation.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

from PIL import Image, ImageDraw, ImageFont

from core.png import decode_png, encode_png

__all__ = [
    "MARKER_COLOURS",
    "Box",
    "PointerKind",
    "decode_png",
    "downscale",
    "draw_marker",
    "draw_outline",
    "encode_png",
    "resize",
    "zoom_box",
    "zoom_crop",
]

PointerKind = Literal["click", "move", "drag"]

#: Click red, MoveTo blue, DragTo green: the convention the narrative prompt describes.
MARKER_COLOURS: dict[str, tuple[int, int, int]] = {
    "click": (255, 0, 0),
    "move": (0, 0, 255),
    "drag": (0, 200, 0),
}


@dataclass(frozen=True, slots=True)
class Box:
    """An axis-aligned box in pixels; `right` and `bottom` are exclusive."""

    left: int
    top: int
    right: int
    bottom: int

    @property
    def width(self) -> int:
        return self.right - self.left

    @property
    def height(self) -> int:
        return self.bottom - self.top

    @property
    def centre(self) -> tuple[int, int]:
        return ((self.left + self.right) // 2, (self.top + self.bottom) // 2)


def resize(img: Image.Image, size: tuple[int, int]) -> Image.Image:
    """`img` at exactly `size` (width, height); unchanged when it already is."""
    return img if img.size == size else img.resize(size, Image.Resampling.LANCZOS)


def downscale(img: Image.Image, longest_side: int | None) -> Image.Image:
    """Shrink so the longer side is at most `longest_side`; never enlarges."""
    if not longest_side or max(img.size) <= longest_side:
        return img
    scale = longest_side / max(img.size)
    size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
    return img.resize(size, Image.Resampling.LANCZOS)


def _clip_point(img: Image.Image, x: float, y: float) -> tuple[int, int]:
    return (min(max(round(x), 0), img.width - 1), min(max(round(y), 0), img.height - 1))


def draw_marker(
    img: Image.Image,
    x: float,
    y: float,
    kind: PointerKind,
    *,
    label: str | None = None,
    radius: int = 14,
    line_from: tuple[float, float] | None = None,
) -> Image.Image:
    """A copy of `img` with a ring and a centre dot at (x, y), clipped to the screen.

    `line_from` draws a line from an earlier pointer position (a drag's MoveTo marker).
    """
    out = img.copy() if img.mode == "RGB" else img.convert("RGB")  # convert copies already
    draw = ImageDraw.Draw(out)
    colour = MARKER_COLOURS[kind]
    cx, cy = _clip_point(out, x, y)
    width = max(2, radius // 4)
    if line_from is not None:
        fx, fy = _clip_point(out, *line_from)
        draw.line([(fx, fy), (cx, cy)], fill=colour, width=width)
    draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], outline=colour, width=width)
    draw.ellipse([cx - 2, cy - 2, cx + 2, cy + 2], fill=colour)
    text = label if label is not None else kind.capitalize()
    tx = cx + radius + 4 if cx + radius + 4 + 8 * len(text) < out.width else cx - radius - 4 - 8 * len(text)
    ty = max(0, cy - radius - 14)
    draw.rectangle([tx - 2, ty - 1, tx + 7 * len(text) + 4, ty + 12], fill=(255, 255, 255))
    draw.text((tx, ty), text, fill=colour, font=_label_font())
    return out


@cache
def _label_font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's default font, loaded once (ImageDraw loads it again for every label)."""
    return ImageFont.load_default()


def zoom_box(width: int, height: int, x: float, y: float, size: int) -> Box:
    """The `size`-pixel square centred on (x, y), shifted to stay inside the screen.

    Shifting (not padding) keeps the crop full of real pixels; only when the screen is
    smaller than `size` does the box shrink to the screen.
    """
    w, h = min(size, width), min(size, height)
    left = round(x) - w // 2
    top = round(y) - h // 2
    left = min(max(left, 0), width - w)
    top = min(max(top, 0), height - h)
    return Box(left, top, left + w, top + h)


def zoom_crop(img: Image.Image, x: float, y: float, *, size: int = 300, scale: float = 2.0) -> tuple[Image.Image, Box]:
    """The square around the pointer, enlarged `scale` times, and where it was taken from."""
    box = zoom_box(img.width, img.height, x, y, size)
    crop = img.crop((box.left, box.top, box.right, box.bottom))
    if scale != 1.0:
        crop = crop.resize((round(box.width * scale), round(box.height * scale)), Image.Resampling.BICUBIC)
    return crop, box


def draw_outline(img: Image.Image, box: Box, *, colour: tuple[int, int, int] = (255, 0, 0), width: int = 3) -> Image.Image:
    """A copy of `img` with `box` outlined, the outline drawn inside the box's edge."""
    out = img.copy() if img.mode == "RGB" else img.convert("RGB")  # convert copies already
    ImageDraw.Draw(out).rectangle([box.left, box.top, box.right - 1, box.bottom - 1], outline=colour, width=width)
    return out
