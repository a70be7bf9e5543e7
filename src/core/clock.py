"""The clock a run records its times by: the wall clock, or a simulation's clock.

Everything that writes a time into a run's files (ledger records, rollout headers, step
timings, a task's selection time) asks `now()` for an epoch time and `monotonic()` for
durations. On an ordinary event loop they are `time.time` and `time.perf_counter`. A
simulated run (``--env sim``) drives its coroutine on a `SimulatedLoop` instead, and then
both read the loop's clock, so every figure in its files is in simulated seconds:

- ``virtual``: a discrete-event clock. Time stands still while code runs and jumps to the
  next timer when every coroutine waits on one (a sleep, a timeout), so a 900 s rollout
  costs only the real time its code needs. Work handed to the default executor
  (``asyncio.to_thread``) runs at once in the loop's thread: it takes no simulated time
  either way, and the hop to a thread and back would cost more real time than the work.
  It never jumps while work on another executor is under way. It runs in one process
  only: a wait on another process it cannot see (a Ray actor's reply) would be jumped
  over, so a Ray run needs ``scaled``.
- ``scaled``: the wall clock sped up `speed` times: a simulated 3 s settle takes 3/speed
  real seconds. Real work counts too, magnified by `speed` (10 ms of a Ray round trip is
  one simulated second at speed 100), which is the price of crossing processes.

`sleep` is for simulated components (the sim fleet, the sim models) that may run on a
plain loop too (on a Ray host): there they sleep `seconds / speed` of real time.
"""

from __future__ import annotations

import asyncio
import selectors
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

__all__ = [
    "ClockSpec",
    "SimulatedLoop",
    "active",
    "monotonic",
    "now",
    "run",
    "sleep",
]

T = TypeVar("T")
ClockMode = Literal["virtual", "scaled"]

_ACTIVE: SimulatedLoop | None = None
_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class ClockSpec:
    """Which clock a simulated run's loop keeps."""

    mode: ClockMode = "virtual"
    speed: float = 1.0
    """Simulated seconds per real second (``scaled`` only)."""

    def __post_init__(self) -> None:
        if not self.speed > 0:
            raise ValueError(f"a clock's speed must be positive, got {self.speed!r}")

    def describe(self) -> str:
        """For labels: how simulated seconds relate to real ones."""
        if self.mode == "virtual":
            return "virtual clock (simulated seconds, discrete events; no real time waited)"
        return f"scaled clock (simulated seconds run {self.speed:g}x faster than real ones)"

    def loop_factory(self) -> Callable[[], SimulatedLoop]:
        return lambda: SimulatedLoop(self)


class _SimulatedSelector(selectors.BaseSelector):
    """The loop's selector, seen through its clock: a wait of `timeout` simulated seconds
    becomes a jump (virtual) or a shorter real wait (scaled)."""

    def __init__(self, inner: selectors.BaseSelector, loop: SimulatedLoop) -> None:
        self._inner = inner
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self._loop
        if loop.spec.mode == "scaled":
            return self._inner.select(None if timeout is None else timeout / loop.spec.speed)
        events = self._inner.select(0)
        if events or timeout == 0:
            return events
        if timeout is None or loop._real_work:
            # No timer is due, or a thread is still working: wait in real time while the
            # simulated clock stands still (a finished thread wakes the loop through its
            # self-pipe, and so does a signal).
            return self._inner.select(None)
        loop._advance(timeout)
        return []

    # the rest is the inner selector's
    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def close(self) -> None:
        self._inner.close()

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.get_key(fileobj)

    def get_map(self) -> Any:
        return self._inner.get_map()


class SimulatedLoop(asyncio.SelectorEventLoop):
    """An event loop whose `time` is simulated (see the module's docstring)."""

    def __init__(self, spec: ClockSpec | None = None) -> None:
        super().__init__()
        self.spec = spec or ClockSpec()
        self._selector = _SimulatedSelector(self._selector, self)  # type: ignore[has-type]
        self._real_start = time.monotonic()
        self._epoch_start = time.time()
        self._virtual = self._real_start
        self._real_work = 0
        #: Simulated seconds jumped over (virtual) so far: the simulation's wall time.
        self.jumped = 0.0
        global _ACTIVE
        with _LOCK:
            _ACTIVE = self

    def time(self) -> float:
        if self.spec.mode == "scaled":
            return self._real_start + (time.monotonic() - self._real_start) * self.spec.speed
        return self._virtual

    def _advance(self, seconds: float) -> None:
        self._virtual += seconds
        self.jumped += seconds

    def epoch(self) -> float:
        """Seconds since the epoch on this loop's clock (it starts at the real time it was made)."""
        return self._epoch_start + (self.time() - self._real_start)

    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:  # type: ignore[override]
        if executor is None and self.spec.mode == "virtual":
            # No simulated time passes while real work runs, so a thread buys nothing but
            # the hops to it and back (milliseconds each, which would dominate a run of a
            # hundred thousand steps): the work runs here, at once.
            future: asyncio.Future[T] = self.create_future()
            try:
                future.set_result(func(*args))
            except BaseException as exc:  # handed to the awaiting coroutine, as a thread's would be
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                future.set_exception(exc)
            return future
        future = super().run_in_executor(executor, func, *args)
        self._real_work += 1
        future.add_done_callback(self._real_done)
        return future

    def _real_done(self, _future: asyncio.Future[Any]) -> None:
        self._real_work -= 1

    def close(self) -> None:
        global _ACTIVE
        with _LOCK:
            if _ACTIVE is self:
                _ACTIVE = None
        super().close()


def active() -> SimulatedLoop | None:
    """The simulated loop of this process, while one is open."""
    return _ACTIVE


def now() -> float:
    """Seconds since the epoch: the simulation's when a simulated loop is open, else the wall's."""
    loop = _ACTIVE
    return loop.epoch() if loop is not None else time.time()


def monotonic() -> float:
    """Seconds for measuring durations, on the same clock as `now`."""
    loop = _ACTIVE
    return loop.time() if loop is not None else time.perf_counter()


async def sleep(seconds: float, *, speed: float = 1.0) -> None:
    """Wait `seconds` simulated seconds: on a simulated loop by its clock, elsewhere (a Ray
    host's plain loop) `seconds / speed` of real time."""
    if seconds <= 0:
        await asyncio.sleep(0)
        return
    running = asyncio.get_running_loop()
    await asyncio.sleep(seconds if isinstance(running, SimulatedLoop) else seconds / speed)


def run(main: Coroutine[Any, Any, T], spec: ClockSpec | None = None) -> T:
    """``asyncio.run(main)``, on a `SimulatedLoop` keeping `spec` when one is given."""
    if spec is None:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=spec.loop_factory()) as runner:
        return runner.run(main)
