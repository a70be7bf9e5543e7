"""Screen points and the arithmetic between coordinate spaces (pointer events are the
trajectory's own `PointerEvent`, so the runner stores them unchanged)."""

from __future__ import annotations

from dataclasses import dataclass

from core.trajectory import PointerEvent

__all__ = ["Point", "PointerEvent", "clamp", "scale"]


@dataclass(frozen=True, slots=True)
class Point:
    """A position in screen pixels, the space actions address."""

    x: int
    y: int


def clamp(x: float, y: float, screen: tuple[int, int]) -> Point:
    """Round to the nearest pixel inside a screen of (width, height)."""
    w, h = screen
    return Point(min(max(round(x), 0), w - 1), min(max(round(y), 0), h - 1))


def scale(x: float, y: float, space: tuple[float, float], screen: tuple[int, int], *, pixels: bool = False) -> Point:
    """Map (x, y) given in a space of (width, height) units onto the screen, clamped.

    With `pixels`, the space is an image of that many pixels and (x, y) names a pixel: its
    centre is mapped onto the screen (pixel 682 of 1365 is the middle of a 1920-px screen,
    960, not 959); units such as thousandths map continuously."""
    sw, sh = space
    if pixels:
        return clamp((x + 0.5) * screen[0] / sw - 0.5, (y + 0.5) * screen[1] / sh - 0.5, screen)
    return clamp(x * screen[0] / sw, y * screen[1] / sh, screen)
