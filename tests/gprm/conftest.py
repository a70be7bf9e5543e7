"""Fixtures of the guide's tests: rendered screens and a real desktop with a known file."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gprm_screens import EDITOR_TEXT, DesktopShot, RenderedScreen, grab, render_screen, start_xvfb


@pytest.fixture(scope="session")
def rendered() -> RenderedScreen:
    return render_screen()


@pytest.fixture(scope="module")
def desktop_shot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DesktopShot]:
    """A 1280×800 Xvfb screen showing mousepad with a file of known text, captured by mss."""
    if not (shutil.which("Xvfb") and shutil.which("mousepad")):
        pytest.skip("Xvfb and mousepad are needed for desktop tests")
    size = (1280, 800)
    folder: Path = tmp_path_factory.mktemp("mousepad")
    file = folder / "notes.txt"
    file.write_text("\n".join(EDITOR_TEXT) + "\n")
    xvfb, display = start_xvfb(size)
    env = {**os.environ, "DISPLAY": display, "HOME": str(folder), "XDG_CONFIG_HOME": str(folder / "config"),
           "NO_AT_BRIDGE": "1"}
    env["DBUS_SESSION_BUS_ADDRESS"] = "disabled:"  # no session bus, and none autolaunched
    editor = subprocess.Popen(["mousepad", "--disable-server", str(file)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        found = False
        while time.monotonic() < deadline and not found:
            time.sleep(0.3)
            probe = subprocess.run(["xdotool", "search", "--name", "notes.txt"], env=env,
                                   capture_output=True, check=False)
            found = probe.returncode == 0 and bool(probe.stdout.strip())
        if not found:
            raise RuntimeError("mousepad did not open a window")
        time.sleep(1.0)  # let it paint
        img = grab(display)
        buf = io.BytesIO()
        img.save(buf, "PNG")
        yield DesktopShot(buf.getvalue(), img.size, EDITOR_TEXT)
    finally:
        editor.terminate()
        try:
            editor.wait(5)
        except subprocess.TimeoutExpired:
            editor.kill()
        xvfb.terminate()
        try:
            xvfb.wait(5)
        except subprocess.TimeoutExpired:
            xvfb.kill()
