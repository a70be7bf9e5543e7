"""OSWorld's own controllers (desktop-env 1.0.2), unchanged, against a real local desktop.

They reach the desktop through the door (`environments.tasks.door.reach`) as they would an
OSWorld VM: every `PythonController` method, every ``computer_13`` action type (each a
``python -c`` of the desktop's own Python, as on OSWorld's image), the terminal text of
GNOME Terminal opened with Ctrl+Alt+T, the accessibility tree in OSWorld's spelling, and
the getters that read the desktop's own ports (VLC's web interface on 8080), not the host's.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from core.trajectory import Task
from environments.local import LocalDesktop, desktop_client
from environments.tasks.context import TaskContext
from environments.tasks.door import reach
from environments.tasks.getters import official_env
from environments.tasks.official import getter

pytestmark = [pytest.mark.desktop, pytest.mark.integration]
controllers = pytest.importorskip("desktop_env.controllers.python", reason="needs desktop-env (scripts/setup.sh)")
ST = "https://accessibility.ubuntu.example.org/ns/state"


def _controller(host: str, port: int) -> tuple[Any, list[dict[str, Any] | None]]:
    """OSWorld's PythonController, each of its `python -c` replies recorded (nothing changed)."""
    controller = controllers.PythonController(vm_ip=host, server_port=port)
    controller.retry_interval = 0.2
    replies: list[dict[str, Any] | None] = []
    run = controller.execute_python_command

    def recorded(command: str) -> Any:
        reply = run(command)
        replies.append(reply)
        return reply

    controller.execute_python_command = recorded
    return controller, replies


def _actions() -> list[Any]:
    """Every computer_13 action type, in an order that leaves a mousepad document saved."""
    return [
        {"action_type": "MOVE_TO", "parameters": {"x": 700, "y": 500}},
        {"action_type": "CLICK", "parameters": {"x": 960, "y": 540}},
        {"action_type": "RIGHT_CLICK", "parameters": {"x": 960, "y": 540}},
        {"action_type": "PRESS", "parameters": {"key": "escape"}},
        {"action_type": "DOUBLE_CLICK", "parameters": {"x": 960, "y": 540}},
        {"action_type": "MOUSE_DOWN", "parameters": {"button": "left"}},
        {"action_type": "MOUSE_UP", "parameters": {"button": "left"}},
        {"action_type": "DRAG_TO", "parameters": {"x": 980, "y": 560}},
        {"action_type": "SCROLL", "parameters": {"dx": 0, "dy": -2}},
        {"action_type": "CLICK", "parameters": {"x": 960, "y": 540}},
        {"action_type": "TYPING", "parameters": {"text": "osworld"}},
        {"action_type": "PRESS", "parameters": {"key": "enter"}},
        {"action_type": "KEY_DOWN", "parameters": {"key": "shift"}},
        {"action_type": "PRESS", "parameters": {"key": "x"}},
        {"action_type": "KEY_UP", "parameters": {"key": "shift"}},
        {"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "s"]}},
        "WAIT",
        {"action_type": "WAIT"},
        "DONE",
        {"action_type": "FAIL"},
    ]


async def test_python_controller_drives_every_method(shared_desktops: list[LocalDesktop], tmp_path: Path) -> None:
    """The mousepad snapshot (~/Documents/notes.txt open), driven by OSWorld's controller alone."""
    desktop = shared_desktops[0]
    await asyncio.to_thread(desktop.revert)
    client = desktop_client(desktop.info())
    try:
        async with reach(client) as endpoint:
            controller, replies = _controller(endpoint.host, endpoint.port)

            def drive() -> dict[str, Any]:
                got: dict[str, Any] = {"platform": controller.get_vm_platform()}
                for action in _actions():
                    controller.execute_action(action)
                time.sleep(1.0)
                got["saved"] = controller.get_file("/home/user/Documents/notes.txt")
                got["position"] = controller.execute_python_command("print(tuple(pyautogui.position()))")
                got["python"] = controller.execute_python_command("import sys; print(sys.executable, 'cv2' in sys.modules)")
                got["screenshot"] = controller.get_screenshot()
                got["screen"] = controller.get_vm_screen_size()
                got["window"] = controller.get_vm_window_size("mousepad")
                got["desktop"] = controller.get_vm_desktop_path()
                got["tree_dir"] = controller.get_vm_directory_tree("/home/user/Documents")
                got["terminal_before"] = controller.get_terminal_output()
                got["run_python"] = controller.run_python_script("import pyautogui\nprint(6 * 7)")
                got["run_bash"] = controller.run_bash_script("echo $((6 * 7)); echo err >&2", timeout=20)
                controller.execute_action({"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "alt", "t"]}})
                for _ in range(60):
                    if controller.get_terminal_output():
                        break
                    time.sleep(0.25)
                controller.execute_action({"action_type": "TYPING", "parameters": {"text": "echo from-the-terminal\n"}})
                for _ in range(40):
                    got["terminal"] = controller.get_terminal_output()
                    if got["terminal"] and got["terminal"].count("from-the-terminal") >= 2:
                        break
                    time.sleep(0.25)
                got["a11y"] = controller.get_accessibility_tree()
                controller.start_recording()
                time.sleep(1.5)
                controller.end_recording(str(tmp_path / "video.mp4"))
                return got

            got = await asyncio.to_thread(drive)
    finally:
        await client.aclose()
    assert got["platform"] == "Linux"
    failed = [r for r in replies if not r or r.get("returncode") != 0]
    assert not failed, failed[:2]
    assert len(replies) >= 20
    assert got["saved"] == b"osworld\nX\n"
    assert got["position"]["output"].strip() == "(960, 540)"
    python, cv2 = got["python"]["output"].split()
    assert python == "/usr/local/bin/python" and cv2 == "False", got["python"]  # the desktop's lean python
    assert got["screenshot"][:8] == b"\x89PNG\r\n\x1a\n"
    assert got["screen"] == {"width": 1920, "height": 1080}
    assert got["window"] and got["window"]["width"] > 100
    assert got["desktop"] == "/home/user/Desktop"
    assert {"type": "file", "name": "notes.txt"} in got["tree_dir"]["children"]
    assert got["terminal_before"] is None
    assert got["run_python"]["output"].strip() == "42" and got["run_python"]["return_code"] == 0
    assert got["run_bash"]["returncode"] == 0 and got["run_bash"]["output"].split() == ["42", "err"]
    assert got["terminal"] and "from-the-terminal\nfrom-the-terminal" in got["terminal"], got["terminal"]
    tree = ET.fromstring(got["a11y"])
    assert tree.tag == "desktop-frame"
    apps = {app.get("name") for app in tree}
    assert {"gnome-terminal-server", "mousepad"} <= apps, apps
    spelled = {key.split("}")[1] for node in tree.iter() for key in node.attrib if key.startswith(f"{{{ST}}}")}
    assert "has_tooltip" in spelled or "selectable_text" in spelled, spelled  # OSWorld's spelling, not has-tooltip
    assert not {s for s in spelled if "-" in s}, spelled
    assert any(node.get("selection") == "true" for node in tree.iter())
    assert (tmp_path / "video.mp4").read_bytes()[4:8] == b"ftyp"


@contextlib.contextmanager
def _host_port_8080() -> Iterator[bool]:
    """A decoy on the host's own 127.0.0.1:8080 (where OSWorld's getter would look with the
    door's address): True while it listens, False when the port is taken."""

    class Decoy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<root><state>the host's port, not the desktop's</state></root>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            return

    try:
        server = HTTPServer(("127.0.0.1", 8080), Decoy)
    except OSError:
        yield False
        return
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield True
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(shutil.which("vlc") is None, reason="needs VLC (AGENT_S3_OSWORLD_APPS=1 bash scripts/setup.sh)")
async def test_vlc_getters_read_the_desktops_own_port(shared_desktops: list[LocalDesktop], tmp_path: Path) -> None:
    """VLC started as OSWorld's tasks start it answers OSWorld's vlc_playing_info getter on the
    desktop's own 8080 (its snapshot turns the web interface on, as OSWorld's image does)."""
    desktop = shared_desktops[1]
    await asyncio.to_thread(desktop.revert)
    task = Task.model_validate({"id": "vlc-door", "instruction": "-", "evaluator": {"func": "infeasible"}})
    ctx = TaskContext(task=task, cache_dir=tmp_path / "cache")
    ctx.cache_dir.mkdir()
    client = desktop_client(desktop.info())
    try:
        await client.launch("VLC_VERBOSE=-1 vlc --no-audio --no-video-title-show", shell=True)
        with _host_port_8080() as decoy:
            async with reach(client) as endpoint:
                env = official_env(endpoint, ctx)
                playing, vlc_config = getter("vlc_playing_info").fn, getter("vlc_config").fn  # OSWorld's own

                def read() -> tuple[str | None, str | None]:
                    status = None
                    for _ in range(80):
                        with contextlib.suppress(Exception):
                            status = playing(env, {"dest": "status.xml"})
                        if status:
                            break
                        time.sleep(0.25)
                    config = vlc_config(env, {"dest": "vlcrc"})
                    return (
                        Path(status).read_text() if status else None,
                        Path(config).read_text() if config else None,
                    )

                status, config = await asyncio.to_thread(read)
    finally:
        await client.aclose()
    assert status is not None, "VLC's web interface did not answer through the door"
    assert "<state>" in status and "the host's port" not in status, status[:200]
    assert config is not None and "http-password=password" in config
    if not decoy:
        pytest.skip("the host's 127.0.0.1:8080 is taken: VLC answered, but no decoy stood on the host's port")
