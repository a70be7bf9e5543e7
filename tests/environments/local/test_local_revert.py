"""Revert: fast, files back to the snapshot, the snapshot's apps running again."""

from __future__ import annotations

import subprocess
import time

import pytest

from environments.local import LocalDesktop

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


def _windows(desktop: LocalDesktop) -> str:
    env = desktop.app_env()
    return subprocess.run(["wmctrl", "-l"], env=env, capture_output=True, text=True, check=False).stdout


def test_revert_restores_files_and_apps_within_two_seconds(shared_desktops: list[LocalDesktop]) -> None:
    desktop = shared_desktops[1]
    notes = desktop.home / "Documents" / "notes.txt"
    xvfb_pid, port = desktop.info().pid, desktop.info().port
    times = []
    for round_ in range(3):
        notes.write_text(f"edited {round_}")
        (desktop.home / "Desktop" / "stray.txt").write_text("x")
        subprocess.Popen(
            [
                "setpriv",
                f"--reuid={desktop.config.uid}",
                f"--regid={desktop.config.gid}",
                "--clear-groups",
                "xterm",
                "-T",
                "stray-term",
            ],
            env=desktop.app_env(),
        )
        deadline = time.monotonic() + 10
        while "stray-term" not in _windows(desktop) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "stray-term" in _windows(desktop)
        times.append(desktop.revert())
        assert notes.read_text() == ""
        assert not (desktop.home / "Desktop" / "stray.txt").exists()
        shown = _windows(desktop)
        assert "stray-term" not in shown
        assert "notes.txt" in shown
    assert max(times) <= 2.0, times
    # Display and server survived every revert.
    assert desktop.info().pid == xvfb_pid and desktop.info().port == port
    assert desktop.problem() is None


async def test_revert_to_another_snapshot_switches_apps(shared_desktops: list[LocalDesktop]) -> None:
    from environments.local import LocalEnvironment
    from environments.local.server_env import server_environment

    desktop = shared_desktops[1]

    async def keep(_: LocalEnvironment) -> None:
        return None

    env = LocalEnvironment(desktop, server_environment(desktop), on_close=keep)
    try:
        await env.revert_to("terminal")
        shown = _windows(desktop)
        assert "Terminal" in shown and "notes.txt" not in shown
        await env.revert()  # stays on the new snapshot
        assert "Terminal" in _windows(desktop)
    finally:
        await env.revert_to("mousepad")
        await env.close()
    assert "notes.txt" in _windows(desktop)
