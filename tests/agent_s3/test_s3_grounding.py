"""Grounding: reading points from replies, coordinate spaces, clamping, a scripted
grounding model over ChatModel, and OCR text spans on a rendered image."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable

import pytest
from PIL import Image

from agent_s3 import (
    Click,
    Done,
    DragAndDrop,
    Grounder,
    GroundingConfig,
    GroundingError,
    HighlightTextSpan,
    OcrReader,
    Point,
    TypeText,
)
from agent_s3.text_spans import Word, find_phrase, span_points
from core.llm import ChatModel, ImagePart, Reply, Script, TextPart
from core.llm.profiles import OVERRIDES_ENV
from core.ocr import parse_tesseract_tsv


def grounder(replies: list[str], **config: object) -> tuple[Grounder, Script]:
    script = Script("ground", [Reply(text=r) for r in replies])
    return Grounder(ChatModel.from_name("scripted/ground"), GroundingConfig(**config)), script


async def test_pixels_are_scaled_from_the_screenshot_to_the_screen(make_png: Callable[..., bytes]) -> None:
    g, script = grounder(["(400, 150)"])
    png = make_png((800, 300))
    result = await g.ground(Click(element_description="the fox"), png, (1600, 600))
    assert result.points == {"target": Point(800, 300)}
    req = script.requests[0]
    assert req.module == "grounding"
    parts = req.messages[-1].parts()
    assert any(isinstance(p, ImagePart) and p.data == png for p in parts)
    assert "the fox" in req.messages[-1].text() and "800x300" in req.messages[-1].text()
    assert result.calls[0].text == "(400, 150)"
    script.assert_done()


@pytest.mark.parametrize(
    ("space", "reply", "expected"),
    [
        ("norm1000", "(500, 250)", Point(960, 270)),
        ("norm100", "(50, 25)", Point(960, 270)),
        ("norm1000", "(1000, 0)", Point(1919, 0)),
    ],
)
async def test_normalised_spaces_and_clamping(
    space: str, reply: str, expected: Point, make_png: Callable[..., bytes]
) -> None:
    g, _ = grounder([reply], space=space)
    result = await g.ground(Click(element_description="x"), make_png(), (1920, 1080))
    assert result.points["target"] == expected


async def test_a_point_outside_the_declared_space_is_refused_with_feedback(make_png: Callable[..., bytes]) -> None:
    g, script = grounder(["(1200, -40)"], space="norm1000")
    with pytest.raises(GroundingError, match=r"outside the 1000x1000 space"):
        await g.ground(Click(element_description="x"), make_png(), (1920, 1080))
    script.assert_done()


async def test_uitars_style_query_with_its_own_resolution(make_png: Callable[..., bytes]) -> None:
    g, script = grounder(
        ["<|box_start|>(1000,500)<|box_end|>"], style="uitars", space="custom", width=2000, height=1000
    )
    result = await g.ground(Click(element_description="OK button"), make_png(), (1280, 720))
    assert result.points["target"] == Point(640, 360)
    parts = script.requests[0].messages[0].parts()
    assert isinstance(parts[0], ImagePart) and isinstance(parts[1], TextPart)
    assert parts[1].text.startswith("Query: OK button")


async def test_custom_space_needs_a_size() -> None:
    with pytest.raises(ValueError, match=r"needs grounding\.width"):
        GroundingConfig(space="custom")


async def test_unparseable_reply_is_a_grounding_error(make_png: Callable[..., bytes]) -> None:
    g, _ = grounder(["I cannot see it"])
    with pytest.raises(GroundingError, match="could not be located"):
        await g.ground(Click(element_description="ghost"), make_png(), (800, 300))


async def test_cache_per_screenshot_and_drag_uses_two_calls(make_png: Callable[..., bytes]) -> None:
    g, script = grounder(["(10, 10)", "(20, 20)", "(30, 30)"])
    png = make_png()
    a = await g.ground(DragAndDrop(starting_description="a", ending_description="b"), png, (800, 300))
    assert {a.points["start"], a.points["end"]} == {Point(10, 10), Point(20, 20)}
    again = await g.ground(Click(element_description="a"), png, (800, 300))
    assert again.points["target"] == a.points["start"] and len(script.requests) == 2
    other = await g.ground(Click(element_description="a"), make_png(colour="lightgrey"), (800, 300))
    assert other.points["target"] == Point(30, 30)
    script.assert_done()


async def test_actions_without_targets_make_no_calls(make_png: Callable[..., bytes]) -> None:
    g, script = grounder([])
    assert (await g.ground(Done(), make_png(), (800, 300))).points == {}
    assert (await g.ground(TypeText(text="x"), make_png(), (800, 300))).points == {}
    assert script.requests == []


def test_tsv_parsing_and_phrase_matching() -> None:
    tsv = (
        "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"
        "1\t1\t0\t0\t0\t0\t0\t0\t800\t300\t-1\t\n"
        "5\t1\t1\t1\t1\t1\t10\t20\t40\t10\t96\tHello,\n"
        "5\t1\t1\t1\t1\t2\t60\t20\t50\t10\t95\twor1d\n"
        "5\t1\t1\t1\t1\t3\t120\t20\t30\t10\t95\tagain\n"
    )
    words = parse_tesseract_tsv(tsv, min_conf=None, scale=(2.0, 2.0))
    assert [w.text for w in words] == ["Hello,", "wor1d", "again"]
    assert (words[0].left, words[0].top, words[0].width) == (20, 40, 80)
    assert find_phrase(words, "hello world") == (0, 1)  # OCR slip tolerated
    assert find_phrase(words, "again") == (2, 2)
    assert find_phrase(words, "missing phrase") is None
    start, end = span_points(words, "Hello", "again", (1600, 600))
    assert start == Point(20, 50) and end == Point(300, 50)


def test_end_phrase_is_searched_after_the_start() -> None:
    words = [Word(t, (10 * i, 0, 10 * i + 8, 10)) for i, t in enumerate("the end of the start and the end".split())]
    start, end = span_points(words, "start", "the end", (1000, 100))
    assert start == Point(40, 5) and end == Point(78, 5)


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
async def test_ocr_span_on_a_rendered_image(make_png: Callable[..., bytes]) -> None:
    g, script = grounder([])
    png = make_png((800, 300))
    result = await g.ground(
        HighlightTextSpan(starting_phrase="quick brown", ending_phrase="lazy dog."), png, (1600, 600)
    )
    start, end = result.points["start"], result.points["end"]
    # "quick" begins about a quarter of the first line in; "dog." ends on the second line.
    assert 100 < start.x < 250 and 60 < start.y < 120
    assert end.x > start.x and 180 < end.y < 260
    assert script.requests == []
    with pytest.raises(GroundingError, match="not found"):
        await g.ground(
            HighlightTextSpan(starting_phrase="purple elephant", ending_phrase="x"), png, (1600, 600)
        )


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
async def test_ocr_reader_scales_word_boxes_to_the_screen(make_png: Callable[..., bytes]) -> None:
    words = await OcrReader().words(make_png((800, 300)), (800, 300))
    doubled = await OcrReader().words(make_png((800, 300)), (1600, 600))
    assert [w.text for w in words][:3] == ["The", "quick", "brown"]
    assert doubled[1].left == pytest.approx(2 * words[1].left, abs=2)


async def test_a_failed_location_is_asked_again(make_png: Callable[..., bytes]) -> None:
    g, script = grounder(["nothing here", "(10, 20)"])
    png = make_png()
    with pytest.raises(GroundingError):
        await g.locate("the OK button", png, (800, 300))
    point, _ = await g.locate("the OK button", png, (800, 300))
    assert point == Point(10, 20)
    script.assert_done()


def vision_grounder(monkeypatch: pytest.MonkeyPatch, vision: dict[str, object], replies: list[str],
                    **config: object) -> tuple[Grounder, Script]:
    """A scripted grounding model whose profile has `vision` rules, as a real model's would."""
    monkeypatch.setenv(OVERRIDES_ENV, json.dumps({"scripted/seeing": {"vision": vision}}))
    script = Script("seeing", [Reply(text=r) for r in replies])
    return Grounder(ChatModel.from_name("scripted/seeing"), GroundingConfig(**config)), script


def _sent(script: Script) -> tuple[int, int]:
    image = next(p for p in script.requests[0].messages[-1].parts() if isinstance(p, ImagePart))
    return Image.open(io.BytesIO(image.data)).size


async def test_the_screenshot_goes_at_the_size_the_model_sees_and_the_prompt_says_so(
        monkeypatch: pytest.MonkeyPatch, make_png: Callable[..., bytes]) -> None:
    """Claude-style limits: 1920x1080 is sent as 1429x804 (long edge <= 1568, <= 1.15 MP), the prompt
    names that size, and a point in it maps back to the screen."""
    g, script = vision_grounder(monkeypatch, {"long_edge": 1568, "pixels": 1150000}, ["(714, 402)"])
    result = await g.ground(Click(element_description="the centre"), make_png((1920, 1080)), (1920, 1080))
    assert _sent(script) == (1429, 804)
    assert "The screenshot is 1429x804 pixels" in script.requests[0].messages[-1].text()
    assert result.points["target"] == Point(960, 540)


@pytest.mark.parametrize(("vision", "reply", "expected", "asked"), [
    ({"points": "norm1000"}, "(250, 500)", Point(480, 540), "from 0 to 1000"),
    ({"points": "yx1000"}, '{"point": [500, 250]}', Point(480, 540), '{"point": [y, x]}'),
    ({"points": "yx1000"}, '[{"box_2d": [400, 200, 600, 300], "label": "OK"}]', Point(480, 540), "y first"),
    ({"points": "pixels", "long_edge": 2048, "short_edge": 768}, "(341, 384)", Point(480, 540), "1365x768"),
])
async def test_the_profile_names_the_convention(monkeypatch: pytest.MonkeyPatch, make_png: Callable[..., bytes],
                                                vision: dict[str, object], reply: str, expected: Point,
                                                asked: str) -> None:
    g, script = vision_grounder(monkeypatch, vision, [reply])
    result = await g.ground(Click(element_description="OK"), make_png((1920, 1080)), (1920, 1080))
    assert result.points["target"] == expected
    assert asked in script.requests[0].messages[-1].text()


async def test_a_y_first_model_is_never_read_x_first(monkeypatch: pytest.MonkeyPatch,
                                                     make_png: Callable[..., bytes]) -> None:
    g, _ = vision_grounder(monkeypatch, {"points": "yx1000"}, ["(250, 500)"])
    with pytest.raises(GroundingError, match=r'\{"point": \[y, x\]\}'):
        await g.ground(Click(element_description="OK"), make_png((1920, 1080)), (1920, 1080))


async def test_fractions_in_a_pixel_space_are_refused_not_clicked_in_the_corner(
        make_png: Callable[..., bytes]) -> None:
    g, _ = grounder(["(0.851, 0.844)"])
    with pytest.raises(GroundingError, match="fractions"):
        await g.ground(Click(element_description="OK"), make_png((1920, 1080)), (1920, 1080))


async def test_an_explicit_space_wins_over_the_profile(monkeypatch: pytest.MonkeyPatch,
                                                      make_png: Callable[..., bytes]) -> None:
    g, _ = vision_grounder(monkeypatch, {"points": "yx1000"}, ["(250, 500)"], space="norm1000")
    result = await g.ground(Click(element_description="OK"), make_png((1920, 1080)), (1920, 1080))
    assert result.points["target"] == Point(480, 540)
