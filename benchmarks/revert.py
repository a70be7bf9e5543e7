"""Revert time of local desktops with and without the spare sandbox, in the same run.

For each desktop count (default 1 and 8, the goal for this 2-core machine) it starts that
many desktops with a spare each, reverts them, closes them, then does the same without
spares, and prints median and worst revert per mode side by side with their ratio, the
load average while each mode ran, and the memory a spare costs (PSS of its processes).

Reverts are timed two ways: one desktop after another (``--rounds`` rounds), and all
desktops at once (``--rounds`` times, as when the rollouts of a wide run end together).
Between rounds the benchmark waits, untimed, until every spare serves again: a rollout
lasts far longer than a spare takes to start, and how long that took is printed too (when a
revert comes before its spare is ready, it waits for it and is timed with the wait). After
each all-at-once round it also times screenshots for a few seconds, while the new spares
start, against screenshots once they serve: what the spares' start costs the live desktops.
Goal: median <= 0.4 s with the spare, worst <= 2 s.

    python benchmarks/revert.py [--desktops 1,8] [--rounds 5] [--snapshot mousepad]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from environments.local import DesktopConfig, LocalDesktop, desktop_client
from environments.local.provider import default_base_dir
from environments.local.spawner import run_blocking

MEDIAN_GOAL_S = 0.4
WORST_GOAL_S = 2.0
SHOT_WINDOW_S = 3.0


@dataclass
class ModeFigures:
    """Reverts of one mode (spare or not) at one desktop count."""

    one_by_one: list[float] = field(default_factory=list)
    all_at_once: list[float] = field(default_factory=list)
    used_spare: int = 0
    spare_ready: list[float] = field(default_factory=list)
    spare_pss_mib: list[float] = field(default_factory=list)
    live_pss_mib: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    shot_after_ms: list[float] = field(default_factory=list)
    shot_settled_ms: list[float] = field(default_factory=list)

    @property
    def reverts(self) -> list[float]:
        return self.one_by_one + self.all_at_once


def _load() -> float:
    return os.getloadavg()[0]


async def _wait_spares(desktops: list[LocalDesktop], figures: ModeFigures, since: float) -> None:
    """Untimed pause until every spare serves; records how long after the reverts that was."""
    if not desktops[0].config.spare:
        return
    ready = await asyncio.gather(*(run_blocking(lambda d=d: d.wait_spare(120)) for d in desktops))
    if not all(ready):
        raise SystemExit("error: a spare did not start; see the desktops' session logs")
    figures.spare_ready.append(time.monotonic() - since)


async def _revert(desktop: LocalDesktop, figures: ModeFigures) -> float:
    seconds = await run_blocking(desktop.revert)
    figures.used_spare += desktop.last_revert_used_spare
    return seconds


async def measure_mode(count: int, rounds: int, config: DesktopConfig, base: Path) -> ModeFigures:
    figures = ModeFigures()
    pool = f"revert-bench-{time.monotonic_ns()}"
    tag = "spare" if config.spare else "cold"
    desktops = [LocalDesktop(f"revert-{tag}-{i}", base, config, pool=pool) for i in range(count)]
    try:
        await asyncio.gather(*(run_blocking(d.start) for d in desktops))
        await _wait_spares(desktops, figures, time.monotonic())
        figures.spare_ready.clear()  # the first spares start with the desktops: not a revert's
        await asyncio.sleep(1.0)  # let apps finish their start-up allocations
        figures.live_pss_mib = [d.memory_kib() / 1024 for d in desktops]
        if config.spare:
            figures.spare_pss_mib = [d.spare_memory_kib() / 1024 for d in desktops]
        for _ in range(rounds):
            figures.load.append(_load())
            for d in desktops:
                figures.one_by_one.append(await _revert(d, figures))
            await _wait_spares(desktops, figures, time.monotonic())
        for _ in range(rounds if count > 1 else 0):
            figures.load.append(_load())
            figures.all_at_once += await asyncio.gather(*(_revert(d, figures) for d in desktops))
            # Steps right after the reverts (while spares start) against steps once settled.
            figures.shot_after_ms += await _screenshots(desktops, SHOT_WINDOW_S)
            await _wait_spares(desktops, figures, time.monotonic())
            await asyncio.sleep(1.0)
            figures.shot_settled_ms += await _screenshots(desktops, SHOT_WINDOW_S)
        figures.load.append(_load())
        return figures
    finally:
        await asyncio.gather(*(run_blocking(d.close) for d in desktops))


async def _screenshots(desktops: list[LocalDesktop], seconds: float) -> list[float]:
    """Screenshot latencies (ms) taken back to back on every desktop for ``seconds``."""

    async def one(desktop: LocalDesktop) -> list[float]:
        times = []
        async with desktop_client(desktop.info()) as client:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                started = time.perf_counter()
                await client.screenshot()
                times.append((time.perf_counter() - started) * 1000)
        return times

    return [t for times in await asyncio.gather(*(one(d) for d in desktops)) for t in times]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _worst(values: list[float]) -> float:
    return max(values) if values else float("nan")


def print_count(count: int, spare: ModeFigures, cold: ModeFigures) -> None:
    print(f"\n== {count} desktop{'s' if count > 1 else ''} ==")
    print(f"load average (1 min) during: spare {min(spare.load):.2f}-{max(spare.load):.2f}, "
          f"no spare {min(cold.load):.2f}-{max(cold.load):.2f}; now {os.getloadavg()}")
    print(f"{'revert (s)':<28}{'spare':>9}{'no spare':>10}{'ratio':>8}")
    rows = [("median, one by one", spare.one_by_one, cold.one_by_one, _median),
            ("worst, one by one", spare.one_by_one, cold.one_by_one, _worst)]
    if count > 1:
        rows += [("median, all at once", spare.all_at_once, cold.all_at_once, _median),
                 ("worst, all at once", spare.all_at_once, cold.all_at_once, _worst)]
    rows += [("median, all", spare.reverts, cold.reverts, _median),
             ("worst, all", spare.reverts, cold.reverts, _worst)]
    for name, with_spare, without, stat in rows:
        a, b = stat(with_spare), stat(without)
        print(f"{name:<28}{a:>9.3f}{b:>10.3f}{a / b:>8.3f}")
    if count > 1:
        print(f"screenshot (ms) in the {SHOT_WINDOW_S:g} s after all reverted at once, median: "
              f"spare {_median(spare.shot_after_ms):.0f} (settled {_median(spare.shot_settled_ms):.0f}), "
              f"no spare {_median(cold.shot_after_ms):.0f} (settled {_median(cold.shot_settled_ms):.0f})")
    print(f"reverts that took the spare: {spare.used_spare} of {len(spare.reverts)}")
    print(f"spares serving again after a round of reverts (s): median {_median(spare.spare_ready):.2f}, "
          f"worst {_worst(spare.spare_ready):.2f}")
    print(f"memory (PSS MiB): desktop median {_median(spare.live_pss_mib):.0f}, "
          f"its spare median {_median(spare.spare_pss_mib):.0f}, "
          f"all {count} spares {sum(spare.spare_pss_mib):.0f}")
    median, worst = _median(spare.reverts), _worst(spare.reverts)
    print(f"goal with the spare: median <= {MEDIAN_GOAL_S} s: {'met' if median <= MEDIAN_GOAL_S else 'NOT met'}; "
          f"worst <= {WORST_GOAL_S:.0f} s: {'met' if worst <= WORST_GOAL_S else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--desktops", default="1,8", help="desktop counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of reverts per way and mode")
    parser.add_argument("--snapshot", default="mousepad", help="snapshot the desktops revert to")
    args = parser.parse_args(argv)
    try:
        counts = [int(c) for c in args.desktops.split(",")]
    except ValueError:
        parser.error("--desktops takes counts such as 1,8")
    if any(c < 1 for c in counts) or args.rounds < 1:
        parser.error("desktop counts and --rounds must be at least 1")
    base = default_base_dir()
    print(f"snapshot {args.snapshot}, {args.rounds} rounds per way; load average at start {os.getloadavg()}")
    for count in counts:
        spare = asyncio.run(measure_mode(count, args.rounds, DesktopConfig(snapshot=args.snapshot, spare=True), base))
        cold = asyncio.run(measure_mode(count, args.rounds, DesktopConfig(snapshot=args.snapshot, spare=False), base))
        print_count(count, spare, cold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
