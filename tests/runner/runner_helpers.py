"""Helpers shared by the runner's tests: whether desktops can run here, starting one, and
the live processes (to find what a test left behind)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from environments.local import DesktopConfig, LocalDesktop
from environments.local.spawner import run_all

_NEEDS = ("Xvfb", "openbox", "mousepad", "xterm", "dbus-daemon", "bwrap", "xdotool", "setpriv")


def desktops_missing() -> str | None:
    missing = [tool for tool in _NEEDS if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (install the desktop Debian packages)"
    if os.geteuid() != 0:
        return "local desktops run apps as an unprivileged uid and need root to start"
    return None


def start_desktop(base: Path, name: str, pool: str) -> LocalDesktop:
    desktop = LocalDesktop(name, base, DesktopConfig(), pool=pool)
    run_all([desktop.start])
    return desktop


def live_commands() -> dict[int, str]:
    """Every live process's command line (zombies and vanished ones left out)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if cmd:
                out[int(entry.name)] = cmd
    return out
