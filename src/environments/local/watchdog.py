"""Kill a pool's desktops when the process that owns them dies, however it dies.

Each desktop's sandbox dies with the spawner thread that started it (a parent-death signal),
and its pid namespace with it. The watchdog (`environments.watchdog`) is the second line:
when the owner is gone, it kills every desktop of the pool by pid namespace and control
group, unmounts their homes and deletes their folders.

Run as ``python -m environments.local.watchdog --owner PID --pool ID --desktops DIR``.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from environments.watchdog import run_watchdog
from environments.watchdog import start_watchdog as _start

from .sweep import reap_desktop

__all__ = ["reap_pool", "start_watchdog"]


def reap_pool(pool: str, desktops_dir: Path) -> int:
    """Kill every desktop of ``pool`` and delete its folders; returns how many processes died."""
    killed = 0
    if desktops_dir.is_dir():
        for entry in desktops_dir.iterdir():
            try:
                owner = (entry / "pool").read_text().strip()
            except OSError:
                continue
            if owner == pool:
                killed += reap_desktop(entry)
    return killed


def start_watchdog(pool: str, desktops_dir: Path) -> subprocess.Popen[bytes]:
    """Start a watchdog for the calling process's pool."""
    return _start("environments.local.watchdog", "--pool", pool, "--desktops", str(desktops_dir))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m environments.local.watchdog")
    parser.add_argument("--pool", required=True)
    parser.add_argument("--desktops", type=Path, required=True)
    return run_watchdog(parser, lambda args: reap_pool(args.pool, args.desktops), argv)


if __name__ == "__main__":
    raise SystemExit(main())
