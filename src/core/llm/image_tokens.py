"""What an image costs in prompt tokens, by the providers' published rules.

Images dominate the prompts of a GUI agent, and their price depends on their pixel size
and on the provider, so the scripted model's usage estimate charges them by these rules
rather than a flat figure. The size is read from the file's header (PNG's IHDR chunk, a
JPEG's frame marker); nothing is decoded. Figures are estimates, not a provider's bill.

- ``openai`` (GPT-4o / GPT-5 style): low detail costs 85 tokens. High detail (and
  ``auto``) fits the image within 2048×2048, then shrinks it so its shorter side is at most
  768 px, then costs 170 tokens per 512-px tile plus 85.
- ``anthropic``: the image is shrunk so its long edge is at most 1568 px and it costs at
  most about 1600 tokens, then costs width×height/750 tokens, rounded up.
"""

from __future__ import annotations

import math
import struct
from typing import Literal, get_args

__all__ = [
    "UNKNOWN_SIZE_TOKENS",
    "ImageRules",
    "anthropic_image_tokens",
    "anthropic_seen_size",
    "image_size",
    "image_tokens",
    "openai_image_tokens",
    "openai_seen_size",
]

ImageRules = Literal["openai", "anthropic"]

#: Tokens charged for an image whose size cannot be read from its header.
UNKNOWN_SIZE_TOKENS = 85

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: JPEG start-of-frame markers (baseline, progressive, ...) that carry the frame size.
_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}

_OPENAI_BASE = 85
_OPENAI_TILE = 170
_OPENAI_FIT = 2048
_OPENAI_SHORT = 768
_ANTHROPIC_LONG_EDGE = 1568
_ANTHROPIC_MAX_TOKENS = 1600
_ANTHROPIC_PIXELS_PER_TOKEN = 750


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG or JPEG header, or None when neither can be read."""
    if data.startswith(_PNG_SIGNATURE) and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return (width, height) if width and height else None
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """Walk the JPEG's marker segments to the first start-of-frame."""
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2:i + 4])
        if marker in _JPEG_SOF:
            if i + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return (width, height) if width and height else None
        i += 2 + length
    return None


def openai_seen_size(width: int, height: int) -> tuple[float, float]:
    """The size OpenAI's high detail shrinks an image to before the model sees it."""
    w, h = float(width), float(height)
    fit = min(1.0, _OPENAI_FIT / max(w, h))
    w, h = w * fit, h * fit
    short = min(1.0, _OPENAI_SHORT / min(w, h))
    return w * short, h * short


def openai_image_tokens(width: int, height: int, detail: str = "high") -> int:
    """OpenAI's tile rule; ``auto`` is charged as high detail (what a screenshot gets)."""
    if detail == "low":
        return _OPENAI_BASE
    w, h = openai_seen_size(width, height)
    tiles = math.ceil(round(w, 6) / 512) * math.ceil(round(h, 6) / 512)
    return _OPENAI_BASE + _OPENAI_TILE * tiles


def anthropic_seen_size(width: int, height: int) -> tuple[float, float]:
    """The size Anthropic shrinks an image to before Claude sees it: a 1568-px long edge,
    then about 1600 tokens of 750 px each."""
    w, h = float(width), float(height)
    scale = min(1.0, _ANTHROPIC_LONG_EDGE / max(w, h))
    w, h = w * scale, h * scale
    max_pixels = _ANTHROPIC_MAX_TOKENS * _ANTHROPIC_PIXELS_PER_TOKEN
    if w * h > max_pixels:
        area = math.sqrt(max_pixels / (w * h))
        w, h = w * area, h * area
    return w, h


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's area rule after its long-edge and token caps."""
    w, h = anthropic_seen_size(width, height)
    return math.ceil(round(w * h, 6) / _ANTHROPIC_PIXELS_PER_TOKEN)


def image_tokens(data: bytes, rules: ImageRules = "openai", detail: str = "auto") -> int:
    """Prompt tokens of one encoded image under `rules`."""
    if rules not in get_args(ImageRules):
        raise ValueError(f"unknown image rules {rules!r}; use one of {', '.join(get_args(ImageRules))}")
    if rules == "openai" and detail == "low":
        return _OPENAI_BASE
    size = image_size(data)
    if size is None:
        return UNKNOWN_SIZE_TOKENS
    if rules == "anthropic":
        return anthropic_image_tokens(*size)
    return openai_image_tokens(*size, detail=detail)
