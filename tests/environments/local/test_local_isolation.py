"""Desktops do not see each other, and losing one leaves the others working."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from core.protocols import EnvironmentLost
from environments.local import DesktopConfig, LocalEnvironment, LocalProvider
from environments.local.procs import cmdline

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


async def test_files_written_in_one_home_are_invisible_to_another(
    desktop_pair: list[LocalEnvironment],
) -> None:
    first, second = desktop_pair
    box1, box2 = first.sandbox(), second.sandbox()
    assert box1 is not None and box2 is not None
    assert (await box1.run("bash", "echo one-only > ~/mine.txt")).ok
    home1 = first.info.home
    seen = await box2.run("bash", f"cat {home1}/mine.txt 2>&1; cat ~/mine.txt 2>&1")
    assert "one-only" not in seen.stdout
    listing = await box2.run("bash", "ls -A /tmp")
    assert os.path.basename(home1) not in listing.stdout
    assert os.path.basename(second.info.home) in listing.stdout
    assert (await box1.run("bash", "cat ~/mine.txt")).stdout.strip() == "one-only"
    assert first.info.display != second.info.display
    shot = await second.screenshot()
    assert shot.startswith(b"\x89PNG")


async def test_a_dead_desktop_is_lost_replaced_and_the_other_keeps_working(env_base_dir) -> None:
    config = DesktopConfig(snapshot="blank")
    async with LocalProvider(2, base_dir=env_base_dir, config=config, prefix="iso") as pool:
        victim, survivor = await pool.acquire(), await pool.acquire()
        os.kill(victim.info.pid, signal.SIGKILL)  # the X server
        for _ in range(250):
            if victim.desktop.problem() is not None:
                break
            await asyncio.sleep(0.02)
        with pytest.raises(EnvironmentLost):
            await victim.screenshot()
        with pytest.raises(EnvironmentLost):
            await victim.revert()
        assert (await survivor.screenshot()).startswith(b"\x89PNG")
        await survivor.revert()
        pool.release(victim)
        fresh = await pool.acquire()
        assert fresh.name != victim.name
        assert (await fresh.screenshot()).startswith(b"\x89PNG")
        assert victim.name not in {e.name for e in pool.environments}
        assert not victim.desktop.processes()
        # A dead controller server is a lost desktop too.
        server = next(
            p for p in fresh.desktop.processes() if "environments.server" in " ".join(cmdline(p.pid))
        )
        os.kill(server.pid, signal.SIGKILL)
        for _ in range(250):
            if fresh.desktop.problem() is not None:
                break
            await asyncio.sleep(0.02)
        with pytest.raises(EnvironmentLost):
            await fresh.act("print(1)")
