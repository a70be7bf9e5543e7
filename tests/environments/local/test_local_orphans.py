"""However the owner ends (SIGKILL, Ctrl-C, SIGTERM), no desktop process survives it."""

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

from environments.local.procs import marked_processes

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
            # an app started through the server escapes the desktop's process group
            done = await envs[0].act("import subprocess; subprocess.Popen(['sleep', '300'], start_new_session=True)")
            assert done.ok, done
            print(json.dumps({"pool": pool.pool_id, "homes": [e.info.home for e in envs]}), flush=True)
            await asyncio.sleep(300)

    asyncio.run(main())
    """
)


def _wait_gone(pool: str, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    left = marked_processes(pool=pool)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = marked_processes(pool=pool)
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
        pool = started["pool"]
        wanted = {"Xvfb", "openbox", "mousepad", "sleep"}
        names: set[str] = set()
        deadline = time.monotonic() + 10
        while not wanted <= names and time.monotonic() < deadline:
            names = {p.comm for p in marked_processes(pool=pool)}
            time.sleep(0.05)
        assert wanted <= names, names
        owner.send_signal(sig)
        owner.wait(timeout=30)
        left = _wait_gone(pool, 10.0)
        assert not left, [(p.pid, p.comm) for p in left]
        # The watchdog deletes folders after the processes are gone.
        leftovers = [Path(h) for h in started["homes"]] + list((base / "desktops").glob("orphan-*"))
        deadline = time.monotonic() + 10
        while any(p.exists() for p in leftovers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in leftovers if p.exists()]
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_sweep_removes_only_folders_of_dead_desktops(tmp_path: Path, shared_desktops: list) -> None:
    from environments.local.sweep import HOME_PREFIX, RUN_PREFIX, sweep_stale

    live_marker = shared_desktops[0].marker
    dead = [tmp_path / f"{HOME_PREFIX}gone-1234abcd", tmp_path / f"{RUN_PREFIX}gone-1234abcd"]
    kept = [tmp_path / f"{HOME_PREFIX}{live_marker}", tmp_path / f"{HOME_PREFIX}young-5678abcd"]
    for folder in dead + kept:
        (folder / "sub").mkdir(parents=True)
    old = time.time() - 3600
    for folder in [*dead, kept[0]]:
        os.utime(folder, (old, old))
    removed = sweep_stale(tmp_path)
    assert sorted(removed) == sorted(dead)
    assert all(not p.exists() for p in dead) and all(p.exists() for p in kept)
