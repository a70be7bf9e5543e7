"""compile_android: every grammar action becomes a valid op list (or none), and the Android
worker hides what a phone cannot do."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from agent_s3.actions import (
    CallCodeAgent,
    Click,
    Done,
    DragAndDrop,
    HighlightTextSpan,
    HoldAndPress,
    Hotkey,
    Open,
    Scroll,
    SwitchApplications,
    TypeText,
    Wait,
)
from agent_s3.compile_android import android_worker, compile_android
from agent_s3.points import Point
from agent_s3.worker import RepeatedFormatError
from core.llm import ChatModel, Reply, Script
from environments.android import parse_ops

SCREEN = (540, 960)
T = {"target": Point(100, 200)}


def compiled(action: object, points: dict[str, Point] | None = None) -> list[dict[str, object]]:
    out = compile_android(action, points if points is not None else T, SCREEN)  # type: ignore[arg-type]
    assert out.code is not None
    parse_ops(out.code)  # what the environment will accept
    return json.loads(out.code)


def test_clicks_are_taps_and_right_click_is_a_long_press() -> None:
    assert compiled(Click(element_description="x")) == [{"op": "tap", "x": 100, "y": 200}]
    assert compiled(Click(element_description="x", num_clicks=2)) == [{"op": "tap", "x": 100, "y": 200}] * 2
    assert compiled(Click(element_description="x", button_type="right")) == [
        {"op": "long_press", "x": 100, "y": 200, "ms": 1000}
    ]
    assert compiled(Click(element_description="x", hold_keys=["shift"]))[0]["op"] == "unsupported"
    out = compile_android(Click(element_description="x"), {"target": Point(9999, -5)}, SCREEN)
    assert json.loads(out.code or "") == [{"op": "tap", "x": 539, "y": 0}]
    assert [(e.kind, e.x, e.y) for e in out.pointer_events] == [("click", 539, 0)]


def test_type_taps_clears_types_and_presses_enter() -> None:
    action = TypeText(element_description="field", text="a b", overwrite=True, enter=True)
    assert compiled(action) == [
        {"op": "tap", "x": 100, "y": 200},
        {"op": "clear"},
        {"op": "text", "text": "a b"},
        {"op": "key", "key": "enter"},
    ]
    assert compiled(TypeText(text="hi"), {}) == [{"op": "text", "text": "hi"}]


def test_scroll_is_a_swipe_in_the_right_direction() -> None:
    down = compiled(Scroll(element_description="list", clicks=-3))
    assert down == [{"op": "swipe", "x1": 100, "y1": 200, "x2": 100, "y2": 0, "ms": 400}]
    up = compiled(Scroll(element_description="list", clicks=2), {"target": Point(270, 480)})
    assert up == [{"op": "swipe", "x1": 270, "y1": 480, "x2": 270, "y2": 672, "ms": 400}]
    right = compiled(
        Scroll(element_description="row", clicks=-1, horizontal=True), {"target": Point(270, 480)}
    )
    assert right[0]["x2"] == 216 and right[0]["y2"] == 480


def test_drags_and_selection_are_slow_swipes() -> None:
    pts = {"start": Point(10, 20), "end": Point(300, 400)}
    swipe = {"op": "swipe", "x1": 10, "y1": 20, "x2": 300, "y2": 400, "ms": 1500}
    assert compiled(DragAndDrop(starting_description="a", ending_description="b"), pts) == [swipe]
    assert compiled(HighlightTextSpan(starting_phrase="a", ending_phrase="b"), pts) == [swipe]


def test_keys_apps_and_control_actions() -> None:
    assert compiled(Hotkey.model_validate({"keys": ["back"]}, context={"platform": "android"})) == [
        {"op": "key", "key": "back"}
    ]
    combo = compiled(Hotkey(keys=["ctrl", "c"]))
    assert combo[0]["op"] == "unsupported" and "key combinations" in str(combo[0]["reason"])
    assert compiled(HoldAndPress(hold_keys=["shift"], press_keys=["a"]))[0]["op"] == "unsupported"
    assert compiled(Open(app_or_filename="Settings")) == [{"op": "open", "app": "Settings"}]
    assert compiled(SwitchApplications(app_code="Notes")) == [{"op": "open", "app": "Notes"}]
    for action in (Wait(seconds=1), Done(), CallCodeAgent()):
        assert compile_android(action, {}, SCREEN).code is None


async def test_android_worker_prompt_is_mobile_and_hides_the_code_agent() -> None:
    Script("pol", [Reply(text="Delegate.\n```python\nagent.call_code_agent()\n```")])
    worker = android_worker(ChatModel.from_name("scripted/pol"))
    prompt = worker.system_prompt("Turn on airplane mode")
    assert "Android phone" in prompt and "long press" in prompt
    assert "call_code_agent" not in prompt and "hold_and_press" not in prompt
    assert "code agent" not in prompt.lower() and "pyautogui" not in prompt
    assert worker.code_agent is None
    buf = io.BytesIO()
    Image.new("RGB", SCREEN, "white").save(buf, "PNG")
    worker.config = worker.config.model_copy(update={"max_format_retries": 0})
    with pytest.raises(RepeatedFormatError, match="not an available action"):
        await worker.step("Turn on airplane mode", buf.getvalue(), SCREEN)
