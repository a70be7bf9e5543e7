"""Waiting for the screen to settle after an action, by the clock or by the screen.

``fixed`` (the paper's setting, the default) waits `RolloutConfig.settle_seconds` (3 s) and
then takes the screenshot. ``auto`` takes screenshots every `settle_poll` seconds from the
moment the action returned and stops once the screen has not changed for `settle_quiet`
seconds, never later than `settle_seconds`; the last screenshot is the step's after-screen.
"Not changed" allows `settle_tolerance` pixels to differ (a blinking text cursor), counted
as pixels whose colour moved by more than `PIXEL_DELTA` in any channel, so a typed
character (a few hundred pixels) is a change and a caret (a few dozen) is not.
`benchmarks/settle.py` measures both on real desktops.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import cv2
import numpy as np

from core import clock
from core.protocols import Environment

from .config import RolloutConfig

__all__ = ["PIXEL_DELTA", "Settled", "changed_pixels", "settle"]

#: A pixel counts as changed when a channel moved by more than this (PNG is lossless, so
#: an unchanged pixel moves by 0; this only keeps anti-aliased edges of a moving cursor out).
PIXEL_DELTA = 24
_FLAGS = cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION


@dataclass(frozen=True, slots=True)
class Settled:
    """The screen after an action: the screenshot (None: take one) and how long was waited."""

    screenshot: bytes | None
    seconds: float
    quiet: bool = False
    """True when ``auto`` saw the screen hold still (False: it waited the whole cap)."""


def changed_pixels(a: bytes, b: bytes) -> int:
    """Pixels that differ between two screenshots (0 for identical files; every pixel when
    their sizes differ)."""
    if a == b:
        return 0
    x = cv2.imdecode(np.frombuffer(a, np.uint8), _FLAGS)
    y = cv2.imdecode(np.frombuffer(b, np.uint8), _FLAGS)
    if x is None or y is None or x.shape != y.shape:
        return max(x.shape[0] * x.shape[1] if x is not None else 1, y.shape[0] * y.shape[1] if y is not None else 1)
    delta = cv2.absdiff(x, y).max(axis=2)
    return int(np.count_nonzero(delta > PIXEL_DELTA))


async def settle(env: Environment, cfg: RolloutConfig) -> Settled:
    """Wait after an action as `cfg.settle` says."""
    cap = cfg.settle_seconds
    if cfg.settle == "fixed" or cap <= 0:
        await asyncio.sleep(cap)
        return Settled(None, cap)
    start = clock.monotonic()
    last = await env.screenshot()
    still_since = clock.monotonic()
    while True:
        now = clock.monotonic()
        if now - still_since >= cfg.settle_quiet:
            return Settled(last, now - start, quiet=True)
        if now - start >= cap:
            return Settled(last, now - start)
        await asyncio.sleep(min(cfg.settle_poll, max(cap - (now - start), 0.0)))
        shot = await env.screenshot()
        moved = await asyncio.to_thread(changed_pixels, last, shot)
        if moved > cfg.settle_tolerance:
            still_since = clock.monotonic()
        last = shot
