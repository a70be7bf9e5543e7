"""The first observation waits for a ready desktop: the task's windows up, no splash, a still screen."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from core.trajectory import Task
from environments.local import DesktopConfig, LocalDesktop, LocalEnvironment
from environments.local.server_env import desktop_client, server_environment
from environments.local.spawner import run_blocking
from environments.tasks import parse_task
from environments.tasks.readiness import CAP_S, _frame, _still, expected_windows


def _png(draw: bool = False, caret: bool = False) -> bytes:
    image = Image.new("RGB", (1920, 1080), (240, 240, 240))
    canvas = ImageDraw.Draw(image)
    if caret:
        canvas.rectangle((400, 300, 401, 318), fill=(0, 0, 0))
    if draw:
        canvas.rectangle((200, 200, 900, 700), fill=(30, 60, 200))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_a_blinking_caret_is_still_a_new_window_is_not() -> None:
    base = _frame(_png())
    assert _still(base, _frame(_png(caret=True)))
    assert not _still(base, _frame(_png(draw=True)))


def test_expected_windows_come_from_launch_and_open_steps() -> None:
    task = parse_task(
        {
            "id": "t",
            "instruction": "-",
            "evaluator": {"func": "infeasible"},
            "config": [
                {"type": "launch", "parameters": {"command": "VLC_VERBOSE=-1 vlc --no-audio", "shell": True}},
                {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}},
                {"type": "open", "parameters": {"path": "/home/user/Desktop/deck.pptx"}},
                {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
            ],
        },
        "inline",
    )
    assert expected_windows(task) == [
        ("a vlc window", ("class:vlc",)),
        ("a window titled 'deck.pptx'", ("title:deck.pptx", "title:deck")),
        ("a google-chrome window", ("class:chromium", "class:google-chrome")),
    ]


@pytest.fixture
def gimp_desktop(tmp_path: Path) -> Iterator[LocalDesktop]:
    if shutil.which("gimp") is None:
        pytest.skip("needs GIMP (AGENT_S3_OSWORLD_APPS=1 bash scripts/setup.sh)")
    desktop = LocalDesktop("ready", tmp_path, DesktopConfig(snapshot="blank", spare=False), pool="tests-ready")
    desktop.start()
    try:
        yield desktop
    finally:
        desktop.close()


@pytest.mark.desktop
@pytest.mark.integration
async def test_the_first_look_at_gimp_is_its_window_not_black_nor_its_splash(gimp_desktop: LocalDesktop) -> None:
    """GIMP as OSWorld's gimp tasks start it: the first screenshot after setup shows its main
    window (its splash gone, the screen still), well within OSWorld's 60 s."""

    async def keep(_: LocalEnvironment) -> None:
        return None

    env = LocalEnvironment(gimp_desktop, server_environment(gimp_desktop), on_close=keep)
    task = Task.from_osworld(
        {
            "id": "gimp-ready",
            "instruction": "-",
            "config": [{"type": "launch", "parameters": {"command": ["gimp"]}}],
            "evaluator": {"func": "infeasible"},
        }
    )
    await env.prepare_task(task, gimp_desktop.base_dir / "cache")
    ready = env.last_readiness
    assert ready is not None and ready.ready, ready
    assert ready.seconds < CAP_S
    shot = Image.open(io.BytesIO(await env.screenshot())).convert("L")
    async with desktop_client(gimp_desktop.info()) as client:
        windows = (await client.execute(["wmctrl", "-lx"])).stdout
    assert "gimp" in windows.lower(), windows
    dark = sum(shot.histogram()[:24]) / (shot.width * shot.height)
    assert dark < 0.9, f"{dark:.0%} of the first screenshot is black"
    await run_blocking(gimp_desktop.revert)
