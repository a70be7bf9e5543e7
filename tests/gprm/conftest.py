"""Fixtures of the guide's tests: rendered screens and a real desktop with a known file."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gprm_screens import EDITOR_TEXT, DesktopShot, LiveDesktop, RenderedScreen, render_screen, start_xvfb


@pytest.fixture(scope="session")
def rendered() -> RenderedScreen:
    return render_screen()


@pytest.fixture(scope="module")
def live_desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDesktop]:
    """A 1280×800 Xvfb screen showing mousepad with a file of known text."""
    if not (shutil.which("Xvfb") and shutil.which("mousepad") and shutil.which("xdotool")):
        pytest.skip("Xvfb, mousepad and xdotool are needed for desktop tests")
    folder: Path = tmp_path_factory.mktemp("mousepad")
    file = folder / "notes.txt"
    file.write_text("\n".join(EDITOR_TEXT) + "\n")
    xvfb, display = start_xvfb((1280, 800))
    env = {**os.environ, "DISPLAY": display, "HOME": str(folder), "XDG_CONFIG_HOME": str(folder / "config"),
           "NO_AT_BRIDGE": "1", "DBUS_SESSION_BUS_ADDRESS": "disabled:"}  # no bus, none autolaunched
    editor = subprocess.Popen(["mousepad", "--disable-server", str(file)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        window = ""
        while time.monotonic() < deadline and not window:
            time.sleep(0.3)
            probe = subprocess.run(["xdotool", "search", "--name", "notes.txt"], env=env,
                                   capture_output=True, check=False)
            window = probe.stdout.decode().split("\n")[0].strip() if probe.returncode == 0 else ""
        if not window:
            raise RuntimeError("mousepad did not open a window")
        time.sleep(1.0)  # let it paint
        yield LiveDesktop(display, env, window, file)
    finally:
        for proc in (editor, xvfb):
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="module")
def desktop_shot(live_desktop: LiveDesktop) -> DesktopShot:
    """The desktop as it first appears, captured by mss."""
    png = live_desktop.screenshot()
    from core.images import decode_png

    return DesktopShot(png, decode_png(png).size, EDITOR_TEXT)
