"""The second line that kills a pool's machines when the process owning them dies, however it dies.

Each machine (a desktop's sandbox, a QEMU) already dies with the spawner thread that started
it (a parent-death signal). A watchdog is a tiny process of its own session (Ctrl-C at a
terminal does not reach it) that waits on a pidfd of the owner and, when the owner is gone,
calls its kind's reaper (`environments.local.watchdog`, `environments.qemu.watchdog`). The
owner stops it with SIGTERM on a clean close. What is shared lives here: how a watchdog is
started, how it waits and how it ends; what it kills is its kind's.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable

__all__ = ["run_watchdog", "start_watchdog"]


def start_watchdog(module: str, *options: str) -> subprocess.Popen[bytes]:
    """Start ``python -m module --owner <this pid> *options`` in a session of its own."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.Popen(
        [sys.executable, "-m", module, "--owner", str(os.getpid()), *options],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True,
    )  # fmt: skip


def _wait_for_exit(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def run_watchdog(parser: argparse.ArgumentParser, reap: Callable[[argparse.Namespace], object],
                 argv: list[str] | None = None) -> int:
    """A watchdog's body: parse ``--owner`` and the kind's options (`parser`), wait for the
    owner to end (SIGTERM ends the watchdog quietly, SIGINT is ignored), then `reap`."""
    parser.add_argument("--owner", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _wait_for_exit(args.owner)
    reap(args)
    return 0
