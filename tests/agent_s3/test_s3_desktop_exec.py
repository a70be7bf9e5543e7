"""Compiled programs run on a real Xvfb desktop (openbox, mousepad, xterm): typed text
arrives exactly, windows are switched and applications started. These run our compiler's
output, with test-chosen literals, in a subprocess bound to the test display."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent_s3 import DesktopOptions, Hotkey, Open, SwitchApplications, TypeText, compile_desktop

pytestmark = [
    pytest.mark.desktop,
    pytest.mark.skipif(
        not all(shutil.which(b) for b in ("Xvfb", "openbox", "mousepad", "xterm", "xdotool", "wmctrl")),
        reason="needs Xvfb, openbox, mousepad, xterm, xdotool and wmctrl",
    ),
]

SCREEN = (1024, 768)


@dataclass
class Desktop:
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, *argv: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def xdotool(self, *args: str, timeout: float = 15) -> str:
        return subprocess.run(
            ["xdotool", *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=True
        ).stdout.strip()

    def wait_window(self, cls: str) -> str:
        return self.xdotool("search", "--sync", "--onlyvisible", "--class", cls).splitlines()[0]

    def active_title(self) -> str:
        return self.xdotool("getactivewindow", "getwindowname")

    def run(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code], env=self.env, capture_output=True, text=True, timeout=60
        )


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[Desktop]:
    read_fd, write_fd = os.pipe()
    xvfb = subprocess.Popen(
        [
            "Xvfb",
            "-displayfd",
            str(write_fd),
            "-screen",
            "0",
            f"{SCREEN[0]}x{SCREEN[1]}x24",
            "-nolisten",
            "tcp",
        ],
        pass_fds=[write_fd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        number = pipe.readline().strip().decode()
    xauth = tmp_path / "xauthority"
    xauth.touch()
    env = {**os.environ, "DISPLAY": f":{number}", "XAUTHORITY": str(xauth), "HOME": str(tmp_path)}
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    d = Desktop(env, [xvfb])
    d.start("openbox")
    time.sleep(0.3)
    try:
        yield d
    finally:
        for proc in reversed(d.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def run_action(desktop: Desktop, action: object, **opts: object) -> None:
    compiled = compile_desktop(action, {}, SCREEN, DesktopOptions(platform="ubuntu", **opts))  # type: ignore[arg-type]
    assert compiled.code is not None
    done = desktop.run(compiled.code)
    assert done.returncode == 0, done.stderr


def test_typed_text_arrives_exactly(desktop: Desktop, tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("")
    canary = tmp_path / "canary"
    desktop.start("mousepad", "--disable-server", str(target))
    desktop.wait_window("mousepad")
    time.sleep(0.5)
    text = f"Grüße, 'single' \"double\" \\back\\slash\n$(touch {canary}) `touch {canary}`\ttab ✓"
    run_action(desktop, TypeText(text=text))
    run_action(desktop, TypeText(text="\nplain ASCII; $HOME 'x'"))
    run_action(desktop, Hotkey(keys=["ctrl", "s"]))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not target.read_text(encoding="utf-8"):
        time.sleep(0.2)
    assert target.read_text(encoding="utf-8").rstrip("\n") == text + "\nplain ASCII; $HOME 'x'"
    assert not canary.exists()


def test_every_printable_ascii_character_arrives_exactly(desktop: Desktop, tmp_path: Path) -> None:
    """pyautogui alone types `<` as `>` on this keymap; the compiled program must not."""
    target = tmp_path / "ascii.txt"
    target.write_text("")
    desktop.start("mousepad", "--disable-server", str(target))
    desktop.wait_window("mousepad")
    time.sleep(0.5)
    text = "".join(chr(c) for c in range(0x20, 0x7F))
    run_action(desktop, TypeText(text=text + "\na<b>c <<>> x<y"))
    run_action(desktop, Hotkey(keys=["ctrl", "s"]))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not target.read_text(encoding="utf-8"):
        time.sleep(0.2)
    assert target.read_text(encoding="utf-8").rstrip("\n") == text + "\na<b>c <<>> x<y"


def test_switch_applications_and_open(desktop: Desktop, tmp_path: Path) -> None:
    note = tmp_path / "a.txt"
    note.write_text("hello")
    desktop.start("mousepad", "--disable-server", str(note))
    desktop.wait_window("mousepad")
    desktop.start("xterm", "-class", "XTerm", "-title", "shell")
    desktop.wait_window("xterm")
    time.sleep(0.5)
    run_action(desktop, SwitchApplications(app_code="mousepad"))
    time.sleep(0.3)
    assert "a.txt" in desktop.active_title()
    run_action(desktop, SwitchApplications(app_code="XTerm"))
    time.sleep(0.3)
    assert desktop.active_title() == "shell"
    before = set(desktop.xdotool("search", "--onlyvisible", "--class", "xterm").split())
    run_action(desktop, Open(app_or_filename="xterm"), ubuntu_open="exec")
    deadline = time.monotonic() + 15
    after = before
    while time.monotonic() < deadline and after == before:
        time.sleep(0.3)
        after = set(desktop.xdotool("search", "--onlyvisible", "--class", "xterm").split())
    assert after - before
