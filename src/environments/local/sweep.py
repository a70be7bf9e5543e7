"""Kill and delete what desktops of dead owners left behind.

Processes die with their owner (parent-death signals, the pool's watchdog), but an owner
killed outright without a watchdog leaves a desktop's host folder behind, with its home
mounts. Each folder holds ``sandbox.json`` (the sandbox's host pid, its pid namespace and
control group), so a desktop is reaped by namespace and cgroup, never by a name or an
environment variable a process could drop.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

from .cgroups import DesktopCgroup, sweep_empty_groups
from .homes import drop_home
from .procs import kill_pids, namespace_processes, pid_namespace

__all__ = ["reap_desktop", "sandbox_alive", "sweep_stale"]


def _records(folder: Path) -> list[dict[str, object]]:
    """The desktop's sandboxes (its live one and its spare) as recorded in ``sandbox.json``."""
    try:
        raw = json.loads((folder / "sandbox.json").read_text())
    except (OSError, ValueError):
        return []
    found = raw.get("sandboxes", [raw]) if isinstance(raw, dict) else []
    return [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []


def _alive(record: dict[str, object]) -> bool:
    namespace, init = record.get("namespace"), record.get("init")
    return isinstance(init, int) and isinstance(namespace, int) and pid_namespace(init) == namespace


def sandbox_alive(folder: Path) -> bool:
    """True while a sandbox recorded in ``folder`` still runs (its first process lives on
    in its namespace)."""
    return any(_alive(record) for record in _records(folder))


def reap_desktop(folder: Path) -> int:
    """Kill every process of the desktop in ``folder`` (live sandbox and spare), unmount its
    homes, delete the folder; returns how many processes were killed."""
    killed = sum(_reap_sandbox(record) for record in _records(folder))
    homes = folder / "homes"
    if homes.is_dir():
        for home in homes.iterdir():
            drop_home(home)
    shutil.rmtree(folder, ignore_errors=True)
    return killed


def _reap_sandbox(record: dict[str, object]) -> int:
    killed = 0
    namespace, init, cgroup = record.get("namespace"), record.get("init"), record.get("cgroup")
    # Only while the recorded first process still lives in the recorded namespace is it this
    # desktop's: once that process is gone the kernel has killed the rest, and a namespace
    # number can be given to a new namespace (another desktop's) later.
    if isinstance(init, int) and isinstance(namespace, int) and pid_namespace(init) == namespace:
        try:
            os.kill(init, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for _ in range(5):
            left = namespace_processes(namespace)
            if not left:
                break
            killed += len(left)
            kill_pids([p.pid for p in left])
    if isinstance(cgroup, str):
        DesktopCgroup(cgroup, memory_bytes=0, pids_max=0, create=False).remove()
    return killed


def sweep_stale(base_dir: Path, *, min_age: float = 120.0) -> list[Path]:
    """Reap desktop folders under ``base_dir/desktops`` whose sandbox is dead and that are
    older than a start-up could take, and empty desktop cgroups of any run; returns what
    was removed."""
    desktops = Path(base_dir) / "desktops"
    removed: list[Path] = sweep_empty_groups(min_age=min_age)
    if not desktops.is_dir():
        return removed
    now = time.time()
    for folder in desktops.iterdir():
        try:
            if folder.is_symlink() or not folder.is_dir() or now - folder.lstat().st_mtime <= min_age:
                continue
        except OSError:
            continue
        if not sandbox_alive(folder):
            reap_desktop(folder)
            removed.append(folder)
    return removed
