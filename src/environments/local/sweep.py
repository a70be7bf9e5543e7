"""Delete what desktops of crashed owners left on disk.

Processes die with their owner (parent-death signal, watchdog), but a desktop used directly,
without a pool's watchdog, leaves its home and runtime folder behind when its owner is
killed. A folder is stale when no live process carries its desktop's marker and it is older
than a start-up could take.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from .procs import DESKTOP_MARKER

__all__ = ["HOME_PREFIX", "RUN_PREFIX", "live_markers", "sweep_stale"]

HOME_PREFIX = "agent-s3-home-"
RUN_PREFIX = "agent-s3-run-"


def live_markers() -> set[str]:
    """Desktop markers carried by any live process."""
    found: set[str] = set()
    needle = f"{DESKTOP_MARKER}=".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry.name}/environ").read_bytes()
        except OSError:
            continue
        for item in raw.split(b"\0"):
            if item.startswith(needle):
                found.add(item[len(needle) :].decode(errors="replace"))
    return found


def sweep_stale(home_root: Path, base_dir: Path | None = None, *, min_age: float = 120.0) -> list[Path]:
    """Remove stale homes and runtime folders in ``home_root`` and stale desktop folders in
    ``base_dir/desktops``; returns what was removed."""
    live = live_markers()
    now = time.time()
    removed: list[Path] = []

    def stale(path: Path, marker: str) -> bool:
        try:
            return marker not in live and now - path.lstat().st_mtime > min_age
        except OSError:
            return False

    for prefix in (HOME_PREFIX, RUN_PREFIX):
        for path in Path(home_root).glob(f"{prefix}*"):
            if path.is_dir() and not path.is_symlink() and stale(path, path.name[len(prefix) :]):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    desktops = Path(base_dir) / "desktops" if base_dir is not None else None
    if desktops is not None and desktops.is_dir():
        for folder in desktops.iterdir():
            try:
                home = Path((folder / "home").read_text().strip())
            except OSError:
                continue
            if home.name.startswith(HOME_PREFIX) and stale(folder, home.name[len(HOME_PREFIX) :]):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed
