"""The simulated clock: a virtual loop runs hours of timers in a blink and every recorded
time follows it; work for threads runs inline and takes no simulated time; a scaled loop
runs the wall clock faster; off a simulated loop, times are the wall's."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from core import clock


def test_a_virtual_loop_jumps_to_each_timer_and_records_simulated_times() -> None:
    async def main() -> tuple[list[float], float, float]:
        start, epoch = clock.monotonic(), clock.now()

        async def wait(seconds: float) -> float:
            await asyncio.sleep(seconds)
            return clock.monotonic() - start

        ends = await asyncio.gather(*(wait(600.0 * i) for i in range(1, 201)))  # 200 waits up to 33 h
        return list(ends), clock.monotonic() - start, clock.now() - epoch

    began = time.perf_counter()
    ends, elapsed, wall = clock.run(main(), clock.ClockSpec())
    assert time.perf_counter() - began < 5.0  # 33 simulated hours
    assert ends == [pytest.approx(600.0 * i) for i in range(1, 201)]
    assert elapsed == pytest.approx(120_000.0) and wall == pytest.approx(120_000.0)
    assert clock.active() is None  # closed with its loop: times are the wall's again
    assert abs(clock.now() - time.time()) < 1.0


def test_timeouts_count_simulated_seconds() -> None:
    async def main() -> str:
        try:
            async with asyncio.timeout(600):
                await asyncio.sleep(900)
        except TimeoutError:
            return f"timed out at {clock.monotonic() - start:.0f}"
        return "no timeout"

    start = 0.0

    async def outer() -> str:
        nonlocal start
        start = clock.monotonic()
        return await main()

    assert clock.run(outer(), clock.ClockSpec()) == "timed out at 600"


def test_thread_work_runs_inline_and_other_executors_hold_the_clock() -> None:
    main_thread = threading.get_ident()

    async def main() -> tuple[int, float, float]:
        start = clock.monotonic()
        ran_on = await asyncio.to_thread(threading.get_ident)
        with ThreadPoolExecutor(1) as pool:
            loop = asyncio.get_running_loop()
            slow = loop.run_in_executor(pool, time.sleep, 0.2)  # real work on a thread of its own
            hour = asyncio.ensure_future(asyncio.sleep(3600))
            await asyncio.wait([slow, hour], return_when=asyncio.FIRST_COMPLETED)
            during = clock.monotonic() - start
            hour.cancel()
        return ran_on, during, clock.monotonic() - start

    ran_on, during, _ = clock.run(main(), clock.ClockSpec())
    assert ran_on == main_thread
    assert during < 1.0  # the hour-long timer did not fire while the other executor worked


def test_a_scaled_loop_runs_the_wall_clock_faster() -> None:
    async def main() -> float:
        start = clock.monotonic()
        await asyncio.sleep(50.0)  # 50 simulated seconds
        return clock.monotonic() - start

    began = time.perf_counter()
    simulated = clock.run(main(), clock.ClockSpec("scaled", 1000.0))
    real = time.perf_counter() - began
    assert simulated >= 50.0 and real < 2.0


def test_clock_sleep_off_a_simulated_loop_waits_scaled_real_time() -> None:
    async def main() -> float:
        began = time.perf_counter()
        await clock.sleep(20.0, speed=1000.0)  # a simulated component on a Ray host's plain loop
        return time.perf_counter() - began

    assert asyncio.run(main()) < 1.0
    with pytest.raises(ValueError, match="positive"):
        clock.ClockSpec("scaled", 0.0)
