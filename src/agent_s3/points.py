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


def scale(x: float, y: float, space: tuple[float, float], screen: tuple[int, int]) -> Point:
    """Map (x, y) given in a space of (width, height) units onto the screen, clamped."""
    sw, sh = space
    return clamp(x * screen[0] / sw, y * screen[1] / sh, screen)
