"""However the owner ends (SIGKILL, Ctrl-C, SIGTERM), no desktop process survives it.

A desktop's processes are found by its pid namespace and its uid, never by a marker a
process could drop: the setsid daemon below clears its environment and leaves its group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from environments.local.homes import mounted_below
from environments.local.procs import namespace_processes
from environments.walls.uids import uid_busy

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

_OWNER = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from environments.local import DesktopConfig, LocalProvider

    async def main() -> None:
        config = DesktopConfig(snapshot="mousepad")
        async with LocalProvider(2, base_dir=Path(sys.argv[1]), config=config, prefix="orphan") as pool:
            envs = [await pool.acquire() for _ in range(2)]
            spares = [await asyncio.to_thread(e.desktop.wait_spare, 60) for e in envs]
            assert all(spares), "the spares did not start"
            # an app started through the server escapes the desktop's group, session and environment
            done = await envs[0].act(
                "import subprocess; subprocess.Popen(['setsid', 'env', '-i', 'sleep', '300'], start_new_session=True)"
            )
            assert done.ok, done
            print(json.dumps({
                "pool": pool.pool_id,
                "namespaces": [e.desktop._namespace for e in envs] + [e.desktop.spare_namespace for e in envs],
                "uids": [e.desktop.uid for e in envs] + [e.desktop.spare_uid for e in envs],
                "folders": [str(e.desktop.dir) for e in envs],
            }), flush=True)
            await asyncio.sleep(300)

    asyncio.run(main())
    """
)


def _left(namespaces: list[int]) -> list:
    return [p for ns in namespaces for p in namespace_processes(ns)]


def _wait_gone(namespaces: list[int], timeout: float) -> list:
    deadline = time.monotonic() + timeout
    left = _left(namespaces)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _left(namespaces)
    return left


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM], ids=["kill", "int", "term"])
def test_owner_death_leaves_no_process_behind(sig: signal.Signals, env_base_dir: Path) -> None:
    base = env_base_dir / f"orphans-{sig.name}"
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(base)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = owner.stdout.readline() if owner.stdout else ""
        assert line, owner.stderr.read() if owner.stderr else "owner printed nothing"
        started = json.loads(line)
        namespaces = started["namespaces"]
        wanted = {"Xvfb", "openbox", "mousepad", "sleep"}
        names: set[str] = set()
        deadline = time.monotonic() + 10
        while not wanted <= names and time.monotonic() < deadline:
            names = {p.comm for p in _left(namespaces)}
            time.sleep(0.05)
        assert wanted <= names, names
        assert all(_left([ns]) for ns in namespaces), "a desktop or spare was not running"
        assert len(set(started["uids"])) == 4, started["uids"]
        owner.send_signal(sig)
        owner.wait(timeout=30)
        left = _wait_gone(namespaces, 10.0)
        assert not left, [(p.pid, p.comm) for p in left]
        assert not any(uid_busy(uid) for uid in started["uids"])
        # The watchdog deletes folders (and unmounts homes) after the processes are gone.
        leftovers = [Path(f) for f in started["folders"]]
        deadline = time.monotonic() + 10
        while any(p.exists() for p in leftovers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in leftovers if p.exists()]
        assert not [m for f in leftovers for m in mounted_below(f)]
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_sweep_removes_only_folders_of_dead_desktops(tmp_path: Path, shared_desktops: list) -> None:
    from environments.local.sweep import sweep_stale

    live = shared_desktops[0]
    base = live.base_dir
    dead = base / "desktops" / "gone-1"
    (dead / "homes" / "1").mkdir(parents=True)
    (dead / "pool").write_text("gone")
    (dead / "sandbox.json").write_text(json.dumps({"pid": 999999999, "init": 999999999, "namespace": 1}))
    young = base / "desktops" / "young-1"
    young.mkdir(parents=True)
    old = time.time() - 3600
    for folder in (dead, live.dir):
        os.utime(folder, (old, old))
    removed = [p for p in sweep_stale(base) if not p.is_relative_to("/sys/fs/cgroup")]
    assert removed == [dead]
    assert not dead.exists() and live.dir.exists() and young.exists()
    assert live.problem() is None
    young.rmdir()
