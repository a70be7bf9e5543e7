"""Kill a pool's VMs when the process that owns them dies, however it dies.

Each QEMU dies with the spawner thread that started it (a parent-death signal). This tiny
process is the second line: in a session of its own (Ctrl-C at a terminal does not reach
it), it waits on a pidfd of the owner and, when the owner is gone, kills every QEMU whose
pid the pool's VM folders record (checked to be that VM's QEMU) and deletes the pool's
folder. The owner stops it with SIGTERM on a clean close; `sweep_stale_pools` does the same
for pools found ownerless.

Run as ``python -m environments.qemu.watchdog --owner PID --pool DIR``.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
from pathlib import Path

__all__ = ["pool_processes", "reap_pool"]


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


def _wait_for_exit(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m environments.qemu.watchdog")
    parser.add_argument("--owner", type=int, required=True)
    parser.add_argument("--pool", type=Path, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _wait_for_exit(args.owner)
    reap_pool(args.pool)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
