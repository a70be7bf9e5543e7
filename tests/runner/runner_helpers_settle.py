"""A screen that changes by a script of simulated time (for the settle tests)."""

from __future__ import annotations

from collections.abc import Callable

from core import clock


class ScriptedScreen:
    """Answers `screenshot` with `frame(seconds since it was made)`, counting the calls."""

    def __init__(self, frame: Callable[[float], bytes]) -> None:
        self.frame = frame
        self.shots = 0
        self._start: float | None = None

    async def screenshot(self) -> bytes:
        now = clock.monotonic()
        if self._start is None:
            self._start = now
        self.shots += 1
        return self.frame(now - self._start)
