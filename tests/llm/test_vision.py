"""The vision rules of the profiles: a screenshot fitted to a model's rules is one the provider
does not shrink (the providers' own rules, as `image_tokens` implements them), and the point
conventions come from the rules table."""

from __future__ import annotations

import pytest

from core.llm.image_tokens import anthropic_seen_size, openai_seen_size
from core.llm.profiles import resolve
from core.llm.vision import VisionRules

SCREENS = [(1920, 1080), (1280, 720), (2560, 1440), (3840, 2160), (1080, 2400), (1366, 768), (800, 600), (1440, 900)]


@pytest.mark.parametrize("screen", SCREENS)
def test_a_fitted_screenshot_is_not_shrunk_by_anthropic(screen: tuple[int, int]) -> None:
    w, h = resolve("anthropic/claude-sonnet-5-5").vision.fit(*screen)
    assert anthropic_seen_size(w, h) == (w, h)
    assert w <= screen[0] and h <= screen[1] and abs(w / h - screen[0] / screen[1]) < 0.01


@pytest.mark.parametrize("screen", SCREENS)
def test_a_fitted_screenshot_is_not_shrunk_by_openai(screen: tuple[int, int]) -> None:
    w, h = resolve("openai/gpt-6.1-sol").vision.fit(*screen)
    seen = openai_seen_size(w, h)
    assert (round(seen[0]), round(seen[1])) == (w, h)


def test_the_shrink_the_providers_would_make() -> None:
    """What the old prompt got wrong: it named 1920x1080; Claude sees 1461x822, GPT 1365x768."""
    assert tuple(round(v) for v in anthropic_seen_size(1920, 1080)) == (1461, 822)
    assert tuple(round(v) for v in openai_seen_size(1920, 1080)) == (1365, 768)


@pytest.mark.parametrize("screen", SCREENS)
def test_a_qwen_style_server_gets_sides_it_keeps(screen: tuple[int, int]) -> None:
    rules = resolve("vllm/ui-tars-1.5-7b").vision
    w, h = rules.fit(*screen)
    assert w % 28 == 0 and h % 28 == 0 and w * h <= 12845056
    # smart_resize keeps a size that is already a multiple of 28 within its budget
    assert (round(w / 28) * 28, round(h / 28) * 28) == (w, h)


def test_conventions_come_from_the_rules_table_and_overrides() -> None:
    assert resolve("gemini/gemini-3-pro").vision.points == "yx1000"
    assert resolve("anthropic/claude-opus-4-7").vision.long_edge == 2576
    assert resolve("openai/gpt-6.1-sol").vision.points == "pixels"
    assert resolve("vllm/qwen3-vl", extra={"vision": {"points": "norm1000"}}).vision.points == "norm1000"
    assert resolve("vllm/qwen3-vl", extra={"vision": {"points": "norm1000"}}).vision.multiple == 28
    assert any(s.startswith("vision:") for s in resolve("anthropic/claude-sonnet-5-5").sources)


def test_fit_never_enlarges() -> None:
    assert VisionRules(long_edge=4000).fit(800, 600) == (800, 600)
    assert VisionRules().fit(1920, 1080) == (1920, 1080)
