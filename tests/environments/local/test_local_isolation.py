"""Desktops do not see each other or the host, and losing one leaves the others working."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from local_helpers import inside

from core.protocols import EnvironmentLost
from environments.local import DesktopConfig, LocalDesktop, LocalEnvironment, LocalProvider

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


async def test_each_desktop_is_its_own_user_pid_space_and_filesystem(
    desktop_pair: list[LocalEnvironment], shared_desktops: list[LocalDesktop]
) -> None:
    first, second = desktop_pair
    d1, d2 = shared_desktops
    assert d1.uid != d2.uid and d1.info().uid == d1.uid
    box1, box2 = first.sandbox(), second.sandbox()
    assert box1 is not None and box2 is not None
    assert (await box1.run("bash", "echo one-only > ~/mine.txt")).ok
    assert "one-only" not in (await box2.run("bash", "cat ~/mine.txt 2>&1")).stdout
    assert (await box1.run("bash", "cat ~/mine.txt")).stdout.strip() == "one-only"
    # Inside: the account is `user` at /home/user, only this desktop's processes exist, the
    # host's folders (run folders, checkouts, other desktops, /root) are not there at all.
    seen = await inside(d1, "id -un; echo $HOME; ps -eo uid= | sort -u; ls / ; ls /home")
    lines = seen.split()
    assert lines[:2] == ["user", "/home/user"]
    assert set(lines) >= {str(d1.uid)} and str(d2.uid) not in lines
    assert "work" not in lines and "srv" not in lines
    # /root is the desktop's root's own home (an empty folder of the sandbox), not the host's.
    assert (await inside(d1, "echo password | sudo -S ls -A /root 2>/dev/null; echo end")).split() == ["end"]
    assert d2.info().home == "/home/user"
    host = await inside(d1, f"ls {d1.base_dir} /work /root 2>&1; ls /proc | grep -c '^[0-9]'")
    assert "No such file or directory" in host
    assert int(host.strip().splitlines()[-1]) < 30, "the desktop sees more processes than its own"
    shot = await second.screenshot()
    assert shot.startswith(b"\x89PNG")


async def test_a_dead_desktop_is_lost_replaced_and_the_other_keeps_working(env_base_dir) -> None:
    config = DesktopConfig(snapshot="blank")
    async with LocalProvider(2, base_dir=env_base_dir, config=config, prefix="iso") as pool:
        victim, survivor = await pool.acquire(), await pool.acquire()
        os.kill(victim.desktop.infra_pids()["xvfb"], signal.SIGKILL)
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
        os.kill(fresh.desktop.infra_pids()["server"], signal.SIGKILL)
        for _ in range(250):
            if fresh.desktop.problem() is not None:
                break
            await asyncio.sleep(0.02)
        with pytest.raises(EnvironmentLost):
            await fresh.act("print(1)")
