"""Image tokens by the providers' published rules, checked against hand-computed figures,
and carried into the scripted model's usage estimate, in process and over real HTTP."""

from __future__ import annotations

import io
from typing import Any

import pytest
from PIL import Image

from core.llm import ChatMessage, ChatModel, ImagePart, Reply, Script, TextPart
from core.llm.image_tokens import (
    UNKNOWN_SIZE_TOKENS,
    anthropic_image_tokens,
    image_size,
    image_tokens,
    openai_image_tokens,
)
from core.llm.scripted import IMAGE_RULES_ENV, estimate_usage


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (30, 60, 90)).save(out, format="PNG", compress_level=1)
    return out.getvalue()


def _jpeg(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(out, format="JPEG", progressive=True)
    return out.getvalue()


# OpenAI, high detail: fit 2048×2048, shorter side to 768, 170 per 512-px tile + 85.
@pytest.mark.parametrize(("width", "height", "tokens"), [
    (1024, 1024, 765),    # → 768×768: 2×2 tiles
    (2048, 4096, 1105),   # → 1024×2048 → 768×1536: 2×3 tiles
    (1920, 1080, 1105),   # → 1365.3×768: 3×2 tiles
    (1280, 720, 1105),    # shorter side already under 768: 3×2 tiles
    (512, 512, 255),      # one tile, never enlarged
    (600, 300, 425),      # 2×1 tiles
    (4000, 1000, 765),    # → 2048×512, shorter side under 768: 4×1 tiles
])
def test_openai_high_detail(width: int, height: int, tokens: int) -> None:
    assert openai_image_tokens(width, height) == tokens
    assert openai_image_tokens(width, height, detail="auto") == tokens
    assert openai_image_tokens(width, height, detail="low") == 85


# Anthropic: long edge ≤ 1568 px and ≤ ~1600 tokens, then ⌈w×h/750⌉.
@pytest.mark.parametrize(("width", "height", "tokens"), [
    (200, 200, 54),       # 40 000 / 750 = 53.3
    (1000, 1000, 1334),   # 1 000 000 / 750 = 1333.3
    (1092, 1092, 1590),   # 1 192 464 / 750 = 1589.95
    (1280, 720, 1229),    # 921 600 / 750 = 1228.8
    (1920, 1080, 1600),   # → 1568×882 = 1.38 MP, over the cap: 1600
    (3000, 200, 219),     # → 1568×104.5 = 163 908 px / 750 = 218.5
])
def test_anthropic(width: int, height: int, tokens: int) -> None:
    assert anthropic_image_tokens(width, height) == tokens


def test_size_comes_from_the_header_alone() -> None:
    png = _png(1920, 1080)
    assert image_size(png) == (1920, 1080)
    assert image_size(png[:24]) == (1920, 1080)  # the IHDR chunk is enough: nothing is decoded
    assert image_size(_jpeg(333, 77)) == (333, 77)
    assert image_size(b"\x89PNG") is None and image_size(b"GIF89a") is None
    assert image_tokens(_png(1024, 1024)) == 765
    assert image_tokens(_png(1024, 1024), "anthropic") == 1399  # 1 048 576 / 750 = 1398.1
    assert image_tokens(_png(1024, 1024), "openai", detail="low") == 85
    assert image_tokens(b"not an image") == UNKNOWN_SIZE_TOKENS
    with pytest.raises(ValueError, match="unknown image rules 'gemini'"):
        image_tokens(png, "gemini")  # type: ignore[arg-type]


def _screen(data: bytes) -> list[ChatMessage]:
    return [ChatMessage(role="user", content=[TextPart(text="abcdefgh"), ImagePart(data=data)])]


def test_estimate_charges_images_by_size_and_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IMAGE_RULES_ENV, raising=False)
    big, small = _png(1920, 1080), _png(512, 512)
    # 4 per message + 2 for the text + the image.
    assert estimate_usage(_screen(big), "12345678").input_tokens == 4 + 2 + 1105
    assert estimate_usage(_screen(small), "").input_tokens == 4 + 2 + 255
    usage = estimate_usage(_screen(big), "12345678", "anthropic")
    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (4 + 2 + 1600, 2, True)
    monkeypatch.setenv(IMAGE_RULES_ENV, "anthropic")
    assert estimate_usage(_screen(small), "").input_tokens == 4 + 2 + 350  # 262 144 / 750
    monkeypatch.setenv(IMAGE_RULES_ENV, "bogus")
    with pytest.raises(ValueError, match="set it to openai or anthropic"):
        estimate_usage(_screen(small), "")


async def test_scripted_model_follows_its_scripts_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IMAGE_RULES_ENV, raising=False)
    screen = _screen(_png(1280, 720))
    Script("img-openai", [Reply(text="ok")])
    Script("img-anthropic", [Reply(text="ok")], image_rules="anthropic")
    openai = await ChatModel.from_name("scripted/img-openai").generate(screen, module="policy")
    anthropic = await ChatModel.from_name("scripted/img-anthropic").generate(screen, module="policy")
    assert openai.usage.estimated and openai.usage.input_tokens == 4 + 2 + 1105
    assert anthropic.usage.estimated and anthropic.usage.input_tokens == 4 + 2 + 1229


async def test_protocol_servers_report_the_size_based_estimate(serve: Any, wire: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IMAGE_RULES_ENV, wire.name)
    async with serve([Reply(text="a desktop")]) as (_, model):
        out = await model.generate(_screen(_png(1920, 1080)), module="policy")
    image = 1105 if wire.name == "openai" else 1600
    assert out.usage.input_tokens == 4 + 2 + image
    assert out.usage.output_tokens == 3
