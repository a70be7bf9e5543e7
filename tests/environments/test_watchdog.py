"""The shared watchdog (`environments.watchdog`) as both kinds run it: it waits for its owner
to end, then reaps; SIGTERM (the owner's clean close) ends it without reaping."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from environments.qemu.watchdog import start_watchdog as start_qemu_watchdog
from environments.watchdog import start_watchdog


def _waiting(pid: int) -> bool:
    """Whether the watchdog `pid` holds its owner's pidfd (so its signal handlers are set)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if any("pidfd" in os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()):
                return True
        time.sleep(0.05)
    return False


def _owner() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)


def test_the_pool_is_reaped_once_its_owner_is_gone(tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    (pool / "vm-1").mkdir(parents=True)
    (pool / "vm-1" / "pid").write_text("1")  # not a QEMU: never killed, only the folder goes
    owner = _owner()
    watchdog = subprocess.Popen([sys.executable, "-m", "environments.qemu.watchdog", "--owner", str(owner.pid),
                                 "--pool", str(pool)])  # fmt: skip
    try:
        assert watchdog.poll() is None and pool.exists()
        owner.communicate(b"", timeout=30)
        assert watchdog.wait(timeout=60) == 0
        assert not pool.exists()
    finally:
        watchdog.kill()


def test_sigterm_ends_a_watchdog_without_reaping(tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    watchdog = start_qemu_watchdog(pool)  # its owner is this process, which lives on
    try:
        assert _waiting(watchdog.pid)
        watchdog.terminate()
        assert watchdog.wait(timeout=60) == 0
        assert pool.exists()
    finally:
        watchdog.kill()


def test_a_local_watchdog_leaves_other_pools_alone(tmp_path: Path) -> None:
    desktops = tmp_path / "desktops"
    (desktops / "d1").mkdir(parents=True)
    (desktops / "d1" / "pool").write_text("someone-else")
    owner = _owner()
    watchdog = subprocess.Popen([sys.executable, "-m", "environments.local.watchdog", "--owner", str(owner.pid),
                                 "--pool", "mine", "--desktops", str(desktops)])  # fmt: skip
    owner.communicate(b"", timeout=30)
    assert watchdog.wait(timeout=60) == 0
    assert (desktops / "d1").exists()
    assert start_watchdog.__module__ == "environments.watchdog"
