"""The screen through the server: PNG of the screen size, the pointer drawn, actions move it."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from PIL import Image, ImageChops

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


def _image(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB")


def _changed(a: Image.Image, b: Image.Image, box: tuple[int, int, int, int]) -> bool:
    return ImageChops.difference(a.crop(box), b.crop(box)).getbbox() is not None


def _around(x: int, y: int, r: int = 24) -> tuple[int, int, int, int]:
    return (x - r, y - r, x + r, y + r)


async def test_screenshot_is_a_png_of_the_screen_size(server: Any) -> None:
    async with server.client() as client:
        png = await client.screenshot()
        size = await client.screen_size()
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG"
    assert image.size == size == (1280, 720)


async def test_screenshot_of_a_1920x1080_desktop(
    display_factory: Callable[[int, int], Any], server_factory: Callable[..., Any]
) -> None:
    big = server_factory(on=display_factory(1920, 1080))
    async with big.client() as client:
        image = Image.open(io.BytesIO(await client.screenshot()))
        assert image.size == (1920, 1080)
        assert await client.screen_size() == (1920, 1080)


async def test_action_moves_the_pointer_and_the_cursor_is_drawn_there(server: Any) -> None:
    async with server.client() as client:
        first = await client.action("pyautogui.moveTo(200, 150)")
        assert first.ok, first
        assert await client.cursor_position() == (200, 150)
        at_a = _image(await client.screenshot())
        moved = await client.action("pyautogui.moveTo(900, 500)")
        assert moved.ok, moved
        assert await client.cursor_position() == (900, 500)
        at_b = _image(await client.screenshot())
    # The cursor image sits at the pointer: the pixels around each position differ between
    # the two shots, while a corner far from both is identical.
    assert _changed(at_a, at_b, _around(200, 150))
    assert _changed(at_a, at_b, _around(900, 500))
    assert not _changed(at_a, at_b, (1100, 20, 1260, 120))


async def test_action_reports_errors_output_and_timeouts(server: Any) -> None:
    async with server.client() as client:
        printed = await client.action("print(pyautogui.position().x + 1)")
        failed = await client.action("raise ValueError('bad action')")
        exited = await client.action("raise SystemExit(4)")
        slow = await client.action("time.sleep(10)", timeout=0.5)
        after = await client.action("print('alive')")
    assert printed.ok and printed.stdout.strip().isdigit()
    assert failed.status == "error" and failed.returncode == 1 and "ValueError: bad action" in failed.stderr
    assert exited.status == "error" and exited.returncode == 4
    assert slow.status == "timeout"
    assert after.ok and after.stdout == "alive\n"


async def test_info_endpoints(server: Any) -> None:
    async with server.client() as client:
        assert await client.platform() == "Linux"
        assert await client.accessibility_tree() is None
