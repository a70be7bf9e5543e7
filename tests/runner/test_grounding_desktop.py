"""Coordinates in the space the model saw, on a real local desktop: a target block is the target;
each grounding model is served over HTTP by the strict fake servers through the official SDKs
and sees the screenshot the way its provider would show it (Claude's and GPT's shrinking,
a Qwen-style server's multiples of 28, Gemini's thousandths); it answers in its own convention,
the worker's compiled click runs on the desktop, and the pointer must end on the target.

A control case sends the screenshot without the profile's rules: Claude then sees it shrunk,
answers in the shrunk image, and the click misses, so the double can fail the test."""

from __future__ import annotations

import asyncio
import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from agent_s3 import Click, DesktopOptions, Grounder, GroundingConfig, compile_desktop
from core.llm import ChatModel, ImagePart, Script, ScriptRequest
from core.llm.image_tokens import anthropic_seen_size, openai_seen_size
from core.llm.profiles import OVERRIDES_ENV
from core.trajectory import Task
from environments.local import LocalEnvironment
from testing.llm import AnthropicServer, FakeServer, OpenAIServer

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

KEY = "sk-grounding-test"
#: The target: a magenta block printed near the bottom right of a white xterm once the window is
#: maximised, where a scale error shows most.
_PAINT = ('while [ "$(tput lines)" -lt 70 ]; do sleep 0.2; done; printf "\\033[?25l\\033[2J"; '
          'for r in 66 67 68 69; do printf "\\033[${r};240H\\033[45m%16s\\033[0m" ""; done; sleep 3600')
TARGET = Task(id="magenta-target", instruction="click the magenta block", config=[
    {"type": "launch", "parameters": {"command": ["xterm", "-bg", "white", "-fg", "black", "-e", "sh", "-c", _PAINT]}},
], evaluator={"func": "infeasible"})


def _target_box(img: Image.Image) -> tuple[int, int, int, int] | None:
    """(left, top, right, bottom) of the target's (magenta) pixels in `img`, or None."""
    a = np.asarray(img.convert("RGB")).astype(int)
    hit = (a[..., 0] > 170) & (a[..., 1] < 60) & (a[..., 2] > 170)
    hit[: max(1, len(hit) // 30)] = False  # the title bar's icon has some of that colour
    ys, xs = np.nonzero(hit)
    if len(xs) < 50:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())


def _smart_resize(w: int, h: int, factor: int = 28, max_pixels: int = 16384 * 28 * 28) -> tuple[int, int]:
    """What a Qwen2.5-VL / UI-TARS-1.5 processor resizes an image to (round to the factor,
    shrink into the pixel budget)."""
    hb, wb = round(h / factor) * factor, round(w / factor) * factor
    if hb * wb > max_pixels:
        beta = math.sqrt(h * w / max_pixels)
        hb, wb = math.floor(h / beta / factor) * factor, math.floor(w / beta / factor) * factor
    return wb, hb


def _seeing(view: str, answer: Callable[[float, float, float, float], str]) -> Callable[[ScriptRequest], str]:
    """A grounding model that looks at the image as its provider shows it (`view`) and points at
    the target block's centre, written by `answer(x, y, width, height)` in what it saw."""

    def reply(request: ScriptRequest) -> str:
        image = next(p for m in request.messages for p in m.parts() if isinstance(p, ImagePart))
        img = Image.open(io.BytesIO(image.data))
        w, h = img.size
        if view == "anthropic":
            w, h = (round(v) for v in anthropic_seen_size(w, h))
        elif view == "openai":
            w, h = (round(v) for v in openai_seen_size(w, h))
        elif view == "qwen":
            w, h = _smart_resize(w, h)
        shown = img.resize((w, h), Image.Resampling.LANCZOS) if (w, h) != img.size else img
        box = _target_box(shown)
        assert box is not None, "the model sees no target"
        return answer((box[0] + box[2]) / 2, (box[1] + box[3]) / 2, w, h)

    return reply


def _pixels(x: float, y: float, w: float, h: float) -> str:
    return f"The target block's centre is at ({round(x)}, {round(y)})."


def _thousandths(x: float, y: float, w: float, h: float) -> str:
    return f"({round(x / w * 1000)}, {round(y / h * 1000)})"


def _gemini(x: float, y: float, w: float, h: float) -> str:
    return "```json\n" + json.dumps([{"point": [round(y / h * 1000), round(x / w * 1000)], "label": "target block"}]) \
        + "\n```"


def _uitars(x: float, y: float, w: float, h: float) -> str:
    return f"Action: click(start_box='<|box_start|>({round(x)},{round(y)})<|box_end|>')"


#: (id, model, server, provider, grounding config, profile override, how it sees, how it answers)
CASES: list[tuple[str, str, type[FakeServer], str | None, dict[str, Any], dict[str, Any] | None, str,
                  Callable[[float, float, float, float], str]]] = [
    ("claude-pixels", "anthropic/claude-sonnet-5-5", AnthropicServer, None, {}, None, "anthropic", _pixels),
    ("gpt-pixels", "openai/gpt-6.1-sol", OpenAIServer, None, {}, None, "openai", _pixels),
    ("gemini-yx1000", "gemini/gemini-3-pro", OpenAIServer, "gemini", {}, None, "as-sent", _gemini),
    ("uitars-pixels", "vllm/ui-tars-1.5-7b", OpenAIServer, "vllm", {"style": "uitars"}, None, "qwen", _uitars),
    ("qwen3vl-norm1000", "vllm/qwen3-vl-8b", OpenAIServer, "vllm", {}, {"points": "norm1000"}, "qwen",
     _thousandths),
]


async def _ground_and_click(env: LocalEnvironment, model_name: str, server_cls: type[FakeServer],
                            provider: str | None, config: dict[str, Any],
                            reply: Callable[[ScriptRequest], str]) -> tuple[int, int]:
    png = await env.screenshot()
    screen = await env.screen_size()
    script = Script("grounding", [reply])
    async with server_cls(script, provider=provider) as server:
        model = ChatModel.from_name(model_name, base_url=server.base_url, api_key=KEY)
        try:
            grounding = await Grounder(model, GroundingConfig(**config)).ground(
                Click(element_description="the target block"), png, screen)
        finally:
            await model.aclose()
    script.assert_done()
    await env.act("import pyautogui\npyautogui.moveTo(5, 5)")
    compiled = compile_desktop(Click(element_description="the target block"), grounding.points, screen,
                               DesktopOptions())
    assert compiled.code is not None
    result = await env.act(compiled.code)
    assert result.status == "ok", result
    return await env.cursor_position()


async def _target(env: LocalEnvironment, tmp_path: Path) -> tuple[int, int, int, int]:
    await env.prepare_task(TARGET, tmp_path)
    last = None
    for _ in range(100):
        box = _target_box(Image.open(io.BytesIO(await env.screenshot())))
        if box is not None and box == last and 40 < box[2] - box[0] < 300 and box[3] - box[1] < 150:
            return box  # drawn, and where the maximised window keeps it
        last = box
        await asyncio.sleep(0.3)
    raise AssertionError("the target block never appeared")


async def test_each_convention_clicks_the_target(local_env: LocalEnvironment, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    left, top, right, bottom = await _target(local_env, tmp_path)
    assert (await local_env.screen_size()) == (1920, 1080)
    for ident, name, server_cls, provider, config, vision, view, answer in CASES:
        monkeypatch.setenv(OVERRIDES_ENV, json.dumps({name: {"vision": vision}} if vision else {}))
        x, y = await _ground_and_click(local_env, name, server_cls, provider, config, _seeing(view, answer))
        assert left <= x <= right and top <= y <= bottom, f"{ident}: clicked ({x}, {y}), target {left, top, right, bottom}"


async def test_a_screenshot_sent_whole_to_claude_misses(local_env: LocalEnvironment, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: without the vision rules, Claude answers in the image it was shrunk to."""
    left, top, right, bottom = await _target(local_env, tmp_path)
    name = "anthropic/claude-sonnet-5-5"
    monkeypatch.setenv(OVERRIDES_ENV, json.dumps({name: {"vision": {"long_edge": None, "pixels": None}}}))
    x, y = await _ground_and_click(local_env, name, AnthropicServer, None, {}, _seeing("anthropic", _pixels))
    assert not (left <= x <= right and top <= y <= bottom)
