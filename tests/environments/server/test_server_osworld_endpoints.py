"""OSWorld's remaining endpoints on a real Xvfb desktop: accessibility, terminal, wallpaper,
desktop path, window size, recording and verified execute, with OSWorld's request shapes."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

ST = "https://accessibility.ubuntu.example.org/ns/state"


def _has_pyatspi() -> bool:
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        return False
    return (
        subprocess.run([python, "-I", "-c", "import pyatspi"], capture_output=True, check=False).returncode
        == 0
    )


@pytest.fixture
def session(display_factory: Callable[[int, int], Any], tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A display with a D-Bus session, openbox and a private home (keyfile gsettings)."""
    if shutil.which("dbus-daemon") is None or shutil.which("openbox") is None:
        pytest.skip("needs dbus-daemon and openbox")
    shown = display_factory(1280, 720)
    home = tmp_path / "home"
    (home / "Desktop").mkdir(parents=True)
    bus = tmp_path / "bus"
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_RUNTIME_DIR": str(tmp_path),
        "GSETTINGS_BACKEND": "keyfile",
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={bus}",
    }
    # A cookie file as real desktops have (Xvfb without -auth accepts any): without one,
    # python-xlib prints a warning on stdout of every pyautogui command.
    xauthority = tmp_path / "Xauthority"
    subprocess.run(["xauth", "-q", "-f", str(xauthority), "add", shown.name, ".", "0" * 32], check=True)
    env["XAUTHORITY"] = str(xauthority)
    full = {**os.environ, **env, "DISPLAY": shown.name}
    full.pop("NO_AT_BRIDGE", None)
    dbus = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address=unix:path={bus}"],
        env=full,
        start_new_session=True,
    )
    manager = subprocess.Popen(
        ["openbox", "--sm-disable"],
        env=full,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    for _ in range(100):
        if bus.exists():
            break
        subprocess.run(["sleep", "0.05"], check=False)
    started: list[subprocess.Popen[bytes]] = []

    def launch(*argv: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            list(argv), env=full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        started.append(proc)
        return proc

    yield {"display": shown, "env": env, "home": home, "launch": launch}
    for proc in [*started, manager, dbus]:
        with_group = proc.poll() is None
        if with_group:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)


async def _wait_for(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await check()
        if got or asyncio.get_running_loop().time() > deadline:
            return got
        await asyncio.sleep(0.25)


async def test_accessibility_tree_in_osworld_form(
    session: dict[str, Any], server_factory: Callable[..., Any]
) -> None:
    if not _has_pyatspi() or shutil.which("mousepad") is None:
        pytest.skip("needs python3-pyatspi, at-spi2-core and mousepad")
    own = server_factory(on=session["display"], env=session["env"])
    session["launch"]("mousepad", "--disable-server")
    async with httpx.AsyncClient(base_url=own.url, headers=own.headers, timeout=90) as http:

        async def tree() -> ET.Element | None:
            reply = await http.get("/accessibility")
            assert reply.status_code == 200, reply.text
            root = ET.fromstring(reply.json()["AT"])
            return root if root.find("application[@name='mousepad']") is not None else None

        root = await _wait_for(tree)
        assert root is not None, "mousepad never appeared in the accessibility tree"
        assert root.tag == "desktop-frame"
        frame = root.find("application[@name='mousepad']/frame")
        assert frame is not None and "Mousepad" in frame.get("name", "")
        assert frame.get(f"{{{ST}}}showing") == "true"
        menus = [e.get("name") for e in root.iter("menu")]
        assert "File" in menus
        terminal = await http.get("/terminal")
        assert terminal.status_code == 200
        assert terminal.json() == {"output": None, "status": "success"}


async def test_accessibility_says_what_to_install_without_atspi(
    session: dict[str, Any], server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """A Python without pyatspi stands for a platform with no AT-SPI: 501, one line, and
    /terminal still answers OSWorld's readiness poll."""
    bare = tmp_path / "bare-python"
    bare.write_text('#!/bin/sh\nexec /usr/bin/python3 -S -I "$@"\n')
    bare.chmod(0o755)
    env = {**session["env"], "AGENT_S3_ATSPI_PYTHON": str(bare)}
    own = server_factory(on=session["display"], env=env)
    async with httpx.AsyncClient(base_url=own.url, headers=own.headers, timeout=60) as http:
        reply = await http.get("/accessibility")
        assert reply.status_code == 501
        assert "install python3-pyatspi" in reply.json()["message"]
        terminal = await http.get("/terminal")
        assert terminal.json() == {"output": None, "status": "success"}


async def test_desktop_path_and_window_size(
    session: dict[str, Any], server_factory: Callable[..., Any]
) -> None:
    own = server_factory(on=session["display"], env=session["env"])
    session["launch"]("xterm", "-geometry", "80x24")
    async with httpx.AsyncClient(base_url=own.url, headers=own.headers, timeout=60) as http:
        desk = await http.post("/desktop_path")
        assert desk.json() == {"desktop_path": str(session["home"] / "Desktop")}

        async def size() -> dict[str, int] | None:
            reply = await http.post("/window_size", data={"app_class_name": "XTerm"})
            return reply.json() if reply.status_code == 200 else None

        got = await _wait_for(size)
        assert got is not None and got["width"] > 100 and got["height"] > 100
        missing = await http.post("/window_size", data={"app_class_name": "no-such-app"})
        assert missing.status_code == 404
        bad = await http.post("/window_size", data={})
        assert bad.status_code == 400


async def test_desktop_path_missing_is_404(
    session: dict[str, Any], server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    own = server_factory(on=session["display"], env={**session["env"], "HOME": str(tmp_path / "nohome")})
    async with httpx.AsyncClient(base_url=own.url, headers=own.headers, timeout=60) as http:
        reply = await http.post("/desktop_path")
        assert reply.status_code == 404 and "no desktop folder" in reply.json()["error"]


async def test_change_wallpaper_then_read_it_back(
    session: dict[str, Any], server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    if shutil.which("gsettings") is None:
        pytest.skip("needs gsettings")
    picture = tmp_path / "red wall.png"
    Image.new("RGB", (64, 48), (220, 20, 30)).save(picture)
    own = server_factory(on=session["display"], env=session["env"])
    async with httpx.AsyncClient(base_url=own.url, headers=own.headers, timeout=60) as http:
        changed = await http.post("/setup/change_wallpaper", json={"path": str(picture)})
        assert changed.status_code == 200, changed.text
        back = await http.post("/wallpaper")
        assert back.status_code == 200
        assert back.content == picture.read_bytes()
        shot = await http.get("/screenshot")
        pixel = Image.open(io.BytesIO(shot.content)).convert("RGB").getpixel((1270, 700))
        assert pixel == (220, 20, 30), "the wallpaper is painted on the root window"
        assert (await http.post("/setup/change_wallpaper", json={})).status_code == 400
        gone = await http.post("/setup/change_wallpaper", json={"path": str(tmp_path / "none.png")})
        assert gone.status_code == 404


async def test_execute_with_verification(
    session: dict[str, Any], server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    own = server_factory(on=session["display"], env=session["env"])
    marker = tmp_path / "made"
    async with httpx.AsyncClient(base_url=own.url, headers=own.headers, timeout=60) as http:
        plain = await http.post("/setup/execute_with_verification", json={"command": ["echo", "hi"]})
        assert plain.json() == {"status": "success", "output": "hi\n", "error": "", "returncode": 0}
        passed = await http.post(
            "/execute_with_verification",
            json={
                "command": f"(sleep 1; touch {marker}) >/dev/null 2>&1 &",
                "shell": True,
                "verification": {"command_success": f"test -f {marker}"},
                "max_wait_time": 10,
                "check_interval": 0.2,
            },
        )
        body = passed.json()
        assert passed.status_code == 200 and body["verification"] == "passed" and body["wait_time"] > 0.5
        window = await http.post(
            "/execute_with_verification",
            json={
                "command": "xterm -T verify-me-window >/dev/null 2>&1 &",
                "shell": True,
                "verification": {"window_exists": "VERIFY-ME"},
                "max_wait_time": 20,
                "check_interval": 0.2,
            },
        )
        assert window.status_code == 200 and window.json()["verification"] == "passed", window.text
        failed = await http.post(
            "/execute_with_verification",
            json={
                "command": ["true"],
                "verification": {"window_exists": "no such window"},
                "max_wait_time": 1,
            },
        )
        assert failed.status_code == 500 and failed.json()["status"] == "verification_failed"


async def test_recording_gives_a_bounded_mp4(
    session: dict[str, Any], server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    if shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None:
        pytest.skip("needs ffmpeg")
    own = server_factory(on=session["display"], env=session["env"])
    async with httpx.AsyncClient(base_url=own.url, headers=own.headers, timeout=60) as http:
        assert (await http.post("/end_recording")).status_code == 400
        started = await http.post("/start_recording")
        assert started.status_code == 200, started.text
        assert started.json()["status"] == "success"
        assert (await http.post("/start_recording")).status_code == 400
        await asyncio.sleep(2)
        ended = await http.post("/end_recording")
        assert ended.status_code == 200, ended.text
        assert ended.headers["content-type"] == "video/mp4"
        video = tmp_path / "recording.mp4"
        video.write_bytes(ended.content)
        probe = await asyncio.to_thread(
            subprocess.run,
            [
                "ffprobe",
                "-v",
                "error",
                "-show_entries",
                "stream=codec_name,width,height",
                "-of",
                "csv=p=0",
                str(video),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert probe.stdout.strip() == "h264,1280,720"
        assert (await http.post("/end_recording")).status_code == 400


async def test_a_recording_ended_as_soon_as_it_starts_still_gives_an_mp4(
    session: dict[str, Any], server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """An ffmpeg slow to start (a loaded host) is waited for: `start_recording` answers once the
    mp4 has its header, so an immediate `end_recording` has a file to send, not a 404."""
    real = shutil.which("ffmpeg")
    if real is None:
        pytest.skip("needs ffmpeg")
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    wrapper = slow / "ffmpeg"
    wrapper.write_text(f'#!/bin/sh\nsleep 2.5\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    env = {**session["env"], "PATH": f"{slow}:{os.environ['PATH']}"}
    own = server_factory(on=session["display"], env=env)
    async with httpx.AsyncClient(base_url=own.url, headers=own.headers, timeout=60) as http:
        started = await http.post("/start_recording")
        assert started.status_code == 200, started.text
        ended = await http.post("/end_recording")
        assert ended.status_code == 200, ended.text
        assert ended.content[4:8] == b"ftyp"


def _serve_folder(folder: Path) -> tuple[subprocess.Popen[str], int]:
    """A plain HTTP file server on a free loopback port (the host side of `download` steps)."""
    files = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
    )
    assert files.stdout is not None
    banner = files.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N ..."
    return files, int(banner.split(" port ")[1].split()[0])


async def test_osworld_setup_controller_runs_every_local_step_type(
    session: dict[str, Any], server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """OSWorld's own SetupController (desktop-env) runs the step types its tasks use against
    the server unchanged: download, upload_file, execute/command (placeholders filled),
    execute_with_verification, launch, open, sleep, activate_window, close_window,
    change_wallpaper. (chrome_open_tabs needs a browser with DevTools; googledrive and login
    need Google accounts.)"""
    pytest.importorskip("playwright", reason="SetupController imports playwright (the dev extra)")
    from environments.tasks.official import register_metrics_package

    register_metrics_package()  # its one import from the metrics package, without torch
    from desktop_env.controllers.setup import SetupController

    own = server_factory("--no-auth", token=None, on=session["display"], env=session["env"])
    host, port = own.url.removeprefix("http://").rsplit(":", 1)
    served = tmp_path / "served"
    served.mkdir()
    (served / "data.txt").write_text("downloaded by the host\n")
    local = tmp_path / "local.txt"
    local.write_text("uploaded from the host\n")
    picture = tmp_path / "wall.png"
    Image.new("RGB", (16, 16), (1, 2, 3)).save(picture)
    files, file_port = _serve_folder(served)
    try:
        home = session["home"]
        config = [
            {"type": "download", "parameters": {"files": [{"url": f"http://127.0.0.1:{file_port}/data.txt", "path": str(home / "Downloads/data.txt")}]}},
            {"type": "upload_file", "parameters": {"files": [{"local_path": str(local), "path": str(home / "up/local.txt")}]}},
            {"type": "execute", "parameters": {"command": f"echo {{SCREEN_WIDTH}}x{{SCREEN_HEIGHT_HALF}} > {home}/size.txt", "shell": True}},
            {"type": "command", "parameters": {"command": ["touch", str(home / "commanded")]}},
            {"type": "execute_with_verification", "parameters": {"command": ["touch", str(home / "verified")], "verification": {"command_success": f"test -f {home}/verified"}, "max_wait_time": 5, "check_interval": 0.2}},
            {"type": "launch", "parameters": {"command": ["xterm", "-T", "launched-by-osworld"]}},
            {"type": "sleep", "parameters": {"seconds": 0.5}},
            {"type": "open", "parameters": {"path": "xterm"}},
            {"type": "activate_window", "parameters": {"window_name": "launched-by-osworld"}},
            {"type": "close_window", "parameters": {"window_name": "launched-by-osworld"}},
            {"type": "change_wallpaper", "parameters": {"path": str(picture)}},
        ]  # fmt: skip
        controller = SetupController(
            vm_ip=host,
            server_port=int(port),
            cache_dir=str(tmp_path / "cache"),
            screen_width=1280,
            screen_height=720,
        )
        (tmp_path / "cache").mkdir()
        assert await asyncio.to_thread(controller.setup, config) is True
    finally:
        files.kill()
        files.wait()
    assert (home / "Downloads/data.txt").read_text() == "downloaded by the host\n"
    assert (home / "up/local.txt").read_text() == "uploaded from the host\n"
    assert (home / "size.txt").read_text() == "1280x360\n"
    assert (home / "commanded").exists() and (home / "verified").exists()
    async with httpx.AsyncClient(base_url=own.url, timeout=30) as http:
        assert (await http.post("/wallpaper")).content == picture.read_bytes()
