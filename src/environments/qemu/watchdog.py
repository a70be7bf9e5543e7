"""Kill a pool's VMs when the process that owns them dies, however it dies.

Each QEMU dies with the spawner thread that started it (a parent-death signal). The
watchdog (`environments.watchdog`) is the second line: when the owner is gone, it kills
every QEMU whose pid the pool's VM folders record (checked to be that VM's QEMU) and deletes
the pool's folder. `sweep_stale_pools` does the same for pools found ownerless.

Run as ``python -m environments.qemu.watchdog --owner PID --pool DIR``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
from pathlib import Path

from environments.watchdog import run_watchdog
from environments.watchdog import start_watchdog as _start

__all__ = ["pool_processes", "reap_pool", "start_watchdog"]


def _qemu_of(pid: int, name: str) -> bool:
    """Whether `pid` is the QEMU of the VM called `name` (not a reused pid)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(b"qemu-system" in a for a in argv[:8]) and f"guest={name}".encode() in argv


def pool_processes(pool: Path) -> list[int]:
    """The live QEMU pids of `pool`'s VMs."""
    found = []
    for vm in pool.iterdir() if pool.is_dir() else ():
        try:
            pid = int((vm / "pid").read_text())
        except (OSError, ValueError):
            continue
        if _qemu_of(pid, vm.name):
            found.append(pid)
    return found


def reap_pool(pool: Path) -> int:
    """Kill `pool`'s VMs and delete its folder; returns how many QEMUs died."""
    killed = 0
    for pid in pool_processes(pool):
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            pass
    shutil.rmtree(pool, ignore_errors=True)
    return killed


def start_watchdog(pool_folder: Path) -> subprocess.Popen[bytes]:
    """A process that kills this pool's VMs once this process is gone, however it ends."""
    return _start("environments.qemu.watchdog", "--pool", str(pool_folder))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m environments.qemu.watchdog")
    parser.add_argument("--pool", type=Path, required=True)
    return run_watchdog(parser, lambda args: reap_pool(args.pool), argv)


if __name__ == "__main__":
    raise SystemExit(main())
