"""Screens for the guide's tests: Pillow-rendered windows and a real Xvfb desktop with
mousepad showing a known file (the fixtures live in conftest.py)."""

from __future__ import annotations

import io
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

EDITOR_TEXT = [
    "Quarterly report draft",
    "Invoice number 48213 is due on Friday",
    "Remember to water the plants",
]


@dataclass(frozen=True)
class Button:
    label: str
    box: tuple[int, int, int, int]


@dataclass(frozen=True)
class RenderedScreen:
    png: bytes
    size: tuple[int, int]
    #: text -> where it was drawn (left, top, right, bottom)
    texts: dict[str, tuple[int, int, int, int]]
    buttons: list[Button]


def render_screen(size: tuple[int, int] = (1000, 600)) -> RenderedScreen:
    """A light window with lines of text and two outlined buttons."""
    img = Image.new("RGB", size, (245, 245, 245))
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(26)
    texts: dict[str, tuple[int, int, int, int]] = {}
    for i, line in enumerate(["Shipping address form", "Deliver the parcel to Berlin"]):
        xy = (40, 40 + 60 * i)
        draw.text(xy, line, fill=(20, 20, 20), font=font)
        texts[line] = tuple(int(v) for v in draw.textbbox(xy, line, font=font))  # type: ignore[assignment]
    buttons = []
    for label, left in (("Cancel", 560), ("Submit", 760)):
        box = (left, 480, left + 160, 540)
        draw.rounded_rectangle(box, radius=6, outline=(60, 60, 60), width=2, fill=(225, 225, 235))
        x0, y0, x1, y1 = draw.textbbox((0, 0), label, font=font)
        tx = box[0] + (160 - (x1 - x0)) // 2 - x0
        ty = box[1] + (60 - (y1 - y0)) // 2 - y0
        draw.text((tx, ty), label, fill=(10, 10, 10), font=font)
        buttons.append(Button(label, box))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return RenderedScreen(buf.getvalue(), size, texts, buttons)


def blank_png(size: tuple[int, int] = (800, 600), colour: tuple[int, int, int] = (255, 255, 255)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, "PNG")
    return buf.getvalue()


@dataclass(frozen=True)
class DesktopShot:
    png: bytes
    size: tuple[int, int]
    lines: list[str]


def start_xvfb(size: tuple[int, int]) -> tuple[subprocess.Popen[bytes], str]:
    read, write = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", f"{size[0]}x{size[1]}x24", "-nolisten", "tcp"],
        pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    os.close(write)
    number = b""
    deadline = time.monotonic() + 15
    while not number.endswith(b"\n") and time.monotonic() < deadline:
        chunk = os.read(read, 16)
        if not chunk:
            break
        number += chunk
    os.close(read)
    if not number.strip():
        proc.kill()
        raise RuntimeError("Xvfb did not report a display number")
    return proc, f":{number.decode().strip()}"


def grab(display: str) -> Image.Image:
    import mss

    with mss.MSS(display=display) as sct:
        shot = sct.grab(sct.monitors[1])
        return Image.frombytes("RGB", shot.size, shot.bgra, "raw", "BGRX")


@dataclass(frozen=True)
class LiveDesktop:
    """An Xvfb display with mousepad open on a file of known text."""

    display: str
    env: dict[str, str]
    window: str
    file: Path

    def screenshot(self) -> bytes:
        buf = io.BytesIO()
        grab(self.display).save(buf, "PNG")
        return buf.getvalue()

    def xdotool(self, *args: str) -> None:
        subprocess.run(["xdotool", *args], env=self.env, check=True, capture_output=True, timeout=30)
