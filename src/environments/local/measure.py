"""Figures of local desktops for benchmarks: start time, revert time, memory, capacity."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from .desktop import DesktopConfig, LocalDesktop
from .spawner import run_blocking

__all__ = ["DesktopFigures", "measure_desktops"]


@dataclass(frozen=True, slots=True)
class DesktopFigures:
    """Medians over the measured desktops; memory is PSS summed over a desktop's processes."""

    desktops: int
    snapshot: str
    start_s: float
    parallel_start_s: float
    revert_s: float
    revert_max_s: float
    pss_mib: float
    pss_total_mib: float

    def as_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


async def measure_desktops(
    count: int = 2,
    *,
    reverts: int = 5,
    snapshot: str = "mousepad",
    base_dir: Path | None = None,
    config: DesktopConfig | None = None,
) -> DesktopFigures:
    """Start ``count`` desktops in parallel, revert each ``reverts`` times, measure, stop them.

    The snapshot defaults to one with mousepad open, so memory includes a real app.
    """
    from .provider import default_base_dir

    cfg = config or DesktopConfig(snapshot=snapshot)
    root = base_dir or default_base_dir()
    pool = f"measure-{time.monotonic_ns()}"
    desktops = [LocalDesktop(f"measure-{i}", root, cfg, pool=pool) for i in range(count)]
    t0 = time.monotonic()
    try:
        await asyncio.gather(*(run_blocking(d.start) for d in desktops))
        parallel = time.monotonic() - t0
        await asyncio.sleep(1.0)  # let apps finish their start-up allocations
        memory = [d.memory_kib() / 1024 for d in desktops]
        times: list[float] = []
        for _ in range(reverts):
            # As between rollouts: each desktop's spare (when on) serves again before reverting.
            await asyncio.gather(*(run_blocking(partial(d.wait_spare, 120)) for d in desktops))
            for d in desktops:
                times.append(await run_blocking(d.revert))
        return DesktopFigures(
            desktops=count,
            snapshot=cfg.snapshot if isinstance(cfg.snapshot, str) else cfg.snapshot.name,
            start_s=statistics.median(d.start_seconds for d in desktops),
            parallel_start_s=parallel,
            revert_s=statistics.median(times) if times else 0.0,
            revert_max_s=max(times) if times else 0.0,
            pss_mib=statistics.median(memory),
            pss_total_mib=sum(memory),
        )
    finally:
        await asyncio.gather(*(run_blocking(d.close) for d in desktops))
