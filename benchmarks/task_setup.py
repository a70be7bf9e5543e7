"""Setup time of local-suite tasks on one real desktop: median seconds of `run_setup`.

Each round reverts the desktop (not timed), then times the task's `config` steps as the runner
runs them (through OSWorld's own `SetupController` at the desktop's door, for this version).
Run it with another checkout's ``src`` on PYTHONPATH to compare versions on the same machine.

    python benchmarks/task_setup.py [-n 3] [task-id ...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from environments.local import DesktopConfig, LocalDesktop
from environments.local.server_env import desktop_client
from environments.tasks import TaskContext, load_suite, run_setup

_DEFAULT = ["mousepad-append-line", "calc-fix-value", "terminal-count-lines"]


async def _measure(
    desktop: LocalDesktop, task_ids: list[str], rounds: int, cache: Path
) -> dict[str, list[float]]:
    suite = {t.id: t for t in load_suite()}
    times: dict[str, list[float]] = {}
    for task_id in task_ids:
        for n in range(rounds):
            await asyncio.to_thread(desktop.revert)
            client = desktop_client(desktop.info())
            await client.wait_ready()
            ctx = TaskContext(task=suite[task_id], cache_dir=cache / task_id / str(n))
            t0 = time.perf_counter()
            await run_setup(client, ctx)
            times.setdefault(task_id, []).append(time.perf_counter() - t0)
            await client.aclose()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=3, help="rounds per task")
    parser.add_argument("tasks", nargs="*", default=_DEFAULT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="task-setup-") as folder:
        desktop = LocalDesktop("setup-bench", Path(folder), DesktopConfig(), pool="bench-setup")
        desktop.start()
        try:
            times = asyncio.run(_measure(desktop, args.tasks, args.n, Path(folder) / "cache"))
        finally:
            desktop.close()
    for task_id, values in times.items():
        print(
            f"{task_id:24s} median {statistics.median(values):6.2f} s  ({', '.join(f'{v:.2f}' for v in values)})"
        )


if __name__ == "__main__":
    main()
