"""Small X11 probes used while starting and reverting a desktop (xprop/xdotool based)."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Mapping

from core.protocols import EnvError

__all__ = ["center_pointer", "wait_for_window", "wait_for_wm"]


def _run(argv: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=dict(env), capture_output=True, text=True, timeout=5, check=False)


def wait_for_wm(env: Mapping[str, str], *, timeout: float = 10.0) -> None:
    """Block until a window manager has claimed the root window (EWMH check window set)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = _run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"], env).stdout
        if "window id" in out:
            return
        time.sleep(0.02)
    raise EnvError("the window manager did not start; check that openbox is installed")


def wait_for_window(env: Mapping[str, str], title: str, *, timeout: float = 15.0) -> None:
    """Block until a visible window whose title contains ``title`` exists."""
    pattern = re.escape(title)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _run(["xdotool", "search", "--onlyvisible", "--name", pattern], env).stdout.strip():
            return
        time.sleep(0.03)
    raise EnvError(f"no window titled {title!r} appeared within {timeout:.0f} s")


def center_pointer(env: Mapping[str, str], width: int, height: int) -> None:
    """Put the pointer in the middle of the screen, so every revert starts alike."""
    _run(["xdotool", "mousemove", str(width // 2), str(height // 2)], env)
