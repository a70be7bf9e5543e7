"""``rollout.settle``: the fixed wait takes its 3 s; ``auto`` goes on once the screen has
held still for the quiet window and returns that screen, waits the whole cap for a screen
that never holds still, and lets a few pixels (a caret) blink within its tolerance."""

from __future__ import annotations

import asyncio

from PIL import Image
from runner_helpers_settle import ScriptedScreen

from core import clock
from core.images import encode_png
from runner.config import RolloutConfig
from runner.settle import changed_pixels, settle


def _png(shade: int, caret: bool = False) -> bytes:
    img = Image.new("RGB", (64, 36), (shade, shade, shade))
    if caret:
        for y in range(10, 20):
            img.putpixel((30, y), (0, 0, 0))
    return encode_png(img)


def _run(screen: ScriptedScreen, cfg: RolloutConfig) -> tuple[float, bytes | None, bool]:
    async def main() -> tuple[float, bytes | None, bool]:
        done = await settle(screen, cfg)  # type: ignore[arg-type]
        return done.seconds, done.screenshot, done.quiet

    return clock.run(main(), clock.ClockSpec())


def test_fixed_waits_the_whole_time_and_takes_no_screenshot() -> None:
    screen = ScriptedScreen(lambda t: _png(100))
    seconds, shot, _ = _run(screen, RolloutConfig(settle_seconds=3.0))
    assert seconds == 3.0 and shot is None and screen.shots == 0


def test_auto_returns_the_screen_once_it_holds_still() -> None:
    screen = ScriptedScreen(lambda t: _png(240 if t >= 0.8 else int(t / 0.2) * 50))  # redraws every 0.2 s until 0.8 s
    seconds, shot, quiet = _run(screen, RolloutConfig(settle="auto", settle_quiet=0.5, settle_poll=0.1))
    assert quiet and 1.3 <= seconds <= 1.5 and shot == _png(240)


def test_auto_waits_the_cap_for_a_screen_that_keeps_changing() -> None:
    screen = ScriptedScreen(lambda t: _png((round(t * 20) * 50) % 250))  # a new frame every 0.05 s
    seconds, shot, quiet = _run(screen, RolloutConfig(settle="auto", settle_seconds=3.0))
    assert not quiet and 3.0 <= seconds <= 3.2 and shot is not None


def test_a_blinking_caret_is_still_within_the_tolerance() -> None:
    blink = ScriptedScreen(lambda t: _png(100, caret=int(t / 0.25) % 2 == 0))
    assert changed_pixels(_png(100), _png(100, caret=True)) == 10
    exact = _run(blink, RolloutConfig(settle="auto", settle_quiet=0.5))
    tolerant = _run(blink, RolloutConfig(settle="auto", settle_quiet=0.5, settle_tolerance=20))
    assert not exact[2] and exact[0] >= 3.0  # exact equality never sees it still
    assert tolerant[2] and tolerant[0] < 1.0


def test_screens_of_other_sizes_count_as_changed() -> None:
    small = encode_png(Image.new("RGB", (10, 10)))
    assert changed_pixels(small, _png(0)) >= 64 * 36
    assert asyncio.iscoroutinefunction(settle)
