"""The first observation waits for a ready desktop: the task's windows up, no splash, a still screen.

On a real desktop: `test_tasks_osworld_real.py` (GIMP's first look is its window)."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw

from environments.tasks import parse_task
from environments.tasks.readiness import _frame, _still, expected_windows


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
