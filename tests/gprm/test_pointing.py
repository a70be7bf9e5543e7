"""The Point tool: answers in every unit land the star where they say; text matching."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from gprm_screens import RenderedScreen, blank_png
from PIL import Image

from core.images import decode_png
from core.llm import ChatModel, ImagePart, Reply, Script, TextPart
from core.llm.profiles import OVERRIDES_ENV
from gprm import LocalUIParser, Perception, ReplyError, parse_point, read_point, text_match
from gprm.elements import draw_star

RED = np.array([255, 0, 0])


def _red_centroid(png: bytes) -> tuple[float, float, int]:
    arr = np.asarray(decode_png(png).convert("RGB")).astype(int)
    mask = (arr[:, :, 0] > 200) & (arr[:, :, 1] < 60) & (arr[:, :, 2] < 60)
    ys, xs = np.nonzero(mask)
    return float(xs.mean()), float(ys.mean()), int(mask.sum())


def test_several_points_are_refused_not_the_first_taken() -> None:
    with pytest.raises(ReplyError, match="2 different points"):
        read_point('<points x1="10.5" y1="20" x2="90" y2="90">icons</points>', (800, 600))
    assert parse_point('<points x1="10" y1="20" x2="10" y2="20">icon</points>', (800, 600)) is not None


@pytest.mark.parametrize(
    ("text", "expected", "form"),
    [
        ('<point x="25" y="50" alt="Save">Save</point>', (200.0, 300.0), "molmo"),
        ('{"point_2d": [600, 150]}', (600.0, 150.0), "point_2d"),
        ("The element is at (40, 60).", (320.0, 360.0), "pair"),
    ],
)
def test_point_answers_in_each_form(text: str, expected: tuple[float, float], form: str) -> None:
    answer = parse_point(text, (800, 600))
    assert answer is not None and (answer.x, answer.y) == expected and answer.form == form


def test_bare_pairs_follow_the_declared_space_and_pixels_scale_from_the_sent_image() -> None:
    assert parse_point("(400, 300)", (1600, 1200), coordinates="pixels", sent_size=(800, 600)).x == 800.0  # type: ignore[union-attr]
    assert parse_point("(40, 30)", (1600, 1200), coordinates="pixels", sent_size=(800, 600)).x == 80.0  # type: ignore[union-attr]
    assert parse_point("(400, 300)", (1600, 1200), sent_size=(800, 600)) is None  # declared percent: never guessed
    assert parse_point('{"x": 50, "y": 50}', (800, 600)).x == 400.0  # type: ignore[union-attr]
    assert parse_point("(0.5, 0.25)", (800, 600), coordinates="fraction").y == 150.0  # type: ignore[union-attr]
    assert parse_point('<point x="130" y="20">x</point>', (800, 600)) is None  # over 100 %
    assert parse_point('{"point_2d": [900, 10]}', (800, 600)) is None  # off screen
    assert parse_point("not found", (800, 600)) is None


def test_star_is_centred_on_the_point() -> None:
    img = decode_png(blank_png((400, 300)))
    from core.images import encode_png

    x, y, count = _red_centroid(encode_png(draw_star(img, 123, 77, radius=15)))
    assert abs(x - 123) <= 2 and abs(y - 77) <= 3 and count > 150


@pytest.mark.parametrize(
    ("reply", "expected"),
    [('<point x="25" y="50">Save</point>', (200, 300)), ('{"point_2d": [600, 150]}', (600, 150))],
)
async def test_point_tool_marks_the_models_answer(reply: str, expected: tuple[int, int]) -> None:
    script = Script("pointer", [Reply(text=reply)])
    tools = Perception(blank_png((800, 600)), pointer=ChatModel.from_name("scripted/pointer"), point_mode="model")
    use = await tools.run("point", {"target": "the Save button"})
    assert use.ok and use.image == "point"
    assert f"pixel ({expected[0]}, {expected[1]})" in use.evidence
    x, y, _ = _red_centroid(tools.images["point"])
    assert abs(x - expected[0]) <= 2 and abs(y - expected[1]) <= 3
    request = script.requests[0]
    assert request.module == "prm"
    parts = request.messages[0].parts()
    assert isinstance(parts[1], ImagePart) and "Save button" in parts[0].text  # type: ignore[union-attr]
    assert isinstance(parts[0], TextPart)
    script.assert_done()


async def test_the_pointing_model_gets_the_screen_it_sees_unshrunk_and_its_own_convention(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Gemini-style pointer: the prompt asks for its y-first thousandths, and a Claude-sized
    limit sends the 1280x800 screen as 1213x758, the size the prompt states."""
    monkeypatch.setenv(OVERRIDES_ENV, json.dumps({"scripted/seeing-pointer": {
        "vision": {"points": "yx1000", "long_edge": 1568, "pixels": 920000}}}))
    script = Script("seeing-pointer", [Reply(text='[{"point": [250, 500], "label": "Save"}]')])
    tools = Perception(blank_png((1280, 800)), pointer=ChatModel.from_name("scripted/seeing-pointer"),
                       point_mode="model", point_coordinates="profile")
    use = await tools.run("point", {"target": "the Save button"})
    assert use.ok and "pixel (640, 200)" in use.evidence
    parts = script.requests[0].messages[0].parts()
    image = next(p for p in parts if isinstance(p, ImagePart))
    assert Image.open(io.BytesIO(image.data)).size == (1213, 758)
    assert '{"point": [Y, X]}' in parts[0].text  # type: ignore[union-attr]


async def test_point_tool_reports_a_miss_without_an_image() -> None:
    Script("pointer", [Reply(text="not found")])
    tools = Perception(blank_png(), pointer=ChatModel.from_name("scripted/pointer"), point_mode="model")
    use = await tools.run("point", {"target": "a purple unicorn"})
    assert not use.ok and "not found" in use.evidence and "point" not in tools.images


async def test_point_by_text_uses_the_parsed_elements(rendered: RenderedScreen) -> None:
    tools = Perception(rendered.png, parser=LocalUIParser("tesseract"), point_mode="ocr")
    use = await tools.run("point", {"target": "the 'Submit' button"})
    assert use.ok, use.evidence
    submit = next(b for b in rendered.buttons if b.label == "Submit")
    x, y, _ = _red_centroid(tools.images["point"])
    assert submit.box[0] <= x <= submit.box[2] and submit.box[1] <= y <= submit.box[3]


def test_text_match_prefers_exact_then_word_then_close() -> None:
    texts = ["File", "Save As", "Save", "Deliver the parcel to Berlin"]
    assert text_match("the 'Save' button", texts) == 2
    assert text_match("Berlin", texts) == 3
    assert text_match("Sav As", texts) == 1
    assert text_match("a gear icon", texts) is None
