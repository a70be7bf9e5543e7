"""Fixtures of the policy's tests: rendered screenshots and a sandbox that records calls."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from PIL import Image, ImageDraw, ImageFont

from core.protocols import ExecResult, SandboxLanguage

LINES = ["The quick brown fox jumps over", "the lazy dog near the river bank."]


def render_png(size: tuple[int, int] = (800, 300), lines: list[str] = LINES, colour: str = "white") -> bytes:
    img = Image.new("RGB", size, colour)
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(28)
    for i, line in enumerate(lines):
        draw.text((20, 30 + 60 * i), line, fill="black", font=font)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture
def screen_png() -> bytes:
    return render_png()


@pytest.fixture
def make_png() -> Callable[..., bytes]:
    """Renders a PNG: `make_png(size=(w, h), lines=[...], colour="white")`."""
    return render_png


@dataclass
class FakeSandbox:
    """Answers each run with the next scripted result and records what it was asked."""

    results: list[ExecResult] = field(default_factory=list)
    calls: list[tuple[SandboxLanguage, str, float]] = field(default_factory=list)

    async def run(self, language: SandboxLanguage, code: str, *, timeout: float = 60.0) -> ExecResult:
        self.calls.append((language, code, timeout))
        if not self.results:
            return ExecResult(status="ok", returncode=0, stdout="")
        return self.results.pop(0)


@pytest.fixture
def sandbox() -> FakeSandbox:
    return FakeSandbox()
