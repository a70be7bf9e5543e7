"""The local UI parser on rendered screens and on a real editor window; the overlay; the
OmniParser client against a loopback server."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from aiohttp import web
from gprm_screens import DesktopShot, RenderedScreen, blank_png
from PIL import Image

from core.images import decode_png, encode_png
from core.ocr import Word, parse_tesseract_tsv, phrases
from gprm import LocalUIParser, OmniParserClient, ParserError, UIElement, draw_marks


def _contains(outer: tuple[int, int, int, int], inner: tuple[int, int, int, int], slack: int = 3) -> bool:
    return (outer[0] <= inner[0] + slack and outer[1] <= inner[1] + slack
            and outer[2] >= inner[2] - slack and outer[3] >= inner[3] - slack)


def _centre(box: tuple[int, int, int, int]) -> tuple[float, float]:
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


def _inside(point: tuple[float, float], box: tuple[int, int, int, int]) -> bool:
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]


async def test_parser_reads_rendered_text_with_boxes_around_it(rendered: RenderedScreen) -> None:
    screen = await LocalUIParser("tesseract").parse(rendered.png)
    assert (screen.width, screen.height) == rendered.size
    for text, drawn in rendered.texts.items():
        hits = [e for e in screen.elements if e.content == text]
        assert hits, f"{text!r} not read; got {[e.content for e in screen.elements]}"
        assert hits[0].type == "text" and not hits[0].interactivity
        assert _inside(_centre(drawn), hits[0].box) and _inside(_centre(hits[0].box), drawn)


async def test_outlined_buttons_become_labelled_interactive_controls(rendered: RenderedScreen) -> None:
    screen = await LocalUIParser("tesseract").parse(rendered.png)
    for button in rendered.buttons:
        hits = [e for e in screen.elements if e.content == button.label]
        assert len(hits) == 1, [e.model_dump() for e in screen.elements]
        element = hits[0]
        assert element.type == "icon" and element.interactivity and element.source == "contour+tesseract"
        assert _contains(element.box, button.box, slack=4) and _contains(button.box, element.box, slack=4)


async def test_plain_background_yields_no_elements() -> None:
    screen = await LocalUIParser("tesseract").parse(blank_png())
    assert screen.elements == []
    assert decode_png(screen.overlay_png).size == (800, 600)


def test_overlay_draws_a_numbered_tag_in_each_box() -> None:
    img = Image.new("RGB", (400, 300), "white")
    elements = [UIElement(id=0, type="text", box=(20, 60, 180, 90), content="a"),
                UIElement(id=7, type="icon", box=(220, 150, 380, 200), content="", interactivity=True)]
    out = draw_marks(img, elements)
    assert img.getpixel((20, 75)) == (255, 255, 255)
    for e in elements:
        left, top, right, bottom = e.box
        assert out.getpixel((left, (top + bottom) // 2)) != (255, 255, 255)  # outline
        assert out.getpixel(((left + right) // 2, (top + bottom) // 2)) == (255, 255, 255)  # inside untouched
        tag = out.crop((left, max(0, top - 20), left + 30, top))
        colours = {c for _, c in tag.getcolors(10_000)}  # type: ignore[union-attr]
        assert (255, 255, 255) in colours and len(colours) >= 2  # white digits on a filled tag
    # the digits differ, so the two tags differ
    t0 = out.crop((20, 40, 35, 60)).tobytes()
    t7 = out.crop((220, 130, 235, 150)).tobytes()
    assert t0 != t7


def test_words_of_a_line_split_into_phrases_at_wide_gaps() -> None:
    words = [Word("File", (0, 0, 24, 14), 0), Word("Edit", (60, 0, 84, 14), 0),
             Word("the", (0, 30, 27, 44), 1), Word("lazy", (36, 30, 72, 44), 1), Word("dog", (81, 30, 108, 44), 1)]
    got = [(p.text, p.box) for p in phrases(words)]
    assert got == [("File", (0, 0, 24, 14)), ("Edit", (60, 0, 84, 14)), ("the lazy dog", (0, 30, 108, 44))]


def test_tesseract_tsv_rows_become_words_with_lines() -> None:
    header = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"
    rows = ["5\t1\t1\t1\t1\t1\t10\t20\t30\t12\t96\tHello", "5\t1\t1\t1\t2\t1\t10\t40\t30\t12\t91\tWorld",
            "5\t1\t1\t1\t2\t2\t50\t40\t8\t12\t5\t~", "4\t1\t1\t1\t1\t0\t10\t20\t80\t12\t-1\t"]
    words = parse_tesseract_tsv("\n".join([header, *rows]))
    assert [(w.text, w.box, w.line) for w in words] == [("Hello", (10, 20, 40, 32), 0), ("World", (10, 40, 40, 52), 1)]


@pytest.mark.desktop
@pytest.mark.parametrize("ocr", ["tesseract", "rapidocr"])
async def test_parser_finds_editor_text_on_a_real_desktop(desktop_shot: DesktopShot, ocr: str) -> None:
    if ocr == "rapidocr":
        pytest.importorskip("rapidocr")
    screen = await LocalUIParser(ocr).parse(desktop_shot.png)  # type: ignore[arg-type]
    assert (screen.width, screen.height) == desktop_shot.size
    img = decode_png(desktop_shot.png).convert("L")
    for line in desktop_shot.lines:
        hits = [e for e in screen.elements if line.casefold() in e.content.casefold()]
        assert hits, f"{line!r} not found by {ocr}: {[e.content for e in screen.elements]}"
        left, top, right, bottom = hits[0].box
        assert right - left >= 8 * len(line) * 0.6 and 8 <= bottom - top <= 60
        # the box holds dark glyph pixels: it sits on the text, not beside it
        assert int(np.asarray(img.crop(hits[0].box)).min()) < 100
    assert any(e.content.casefold() == "file" for e in screen.elements)  # the menu bar is read per menu
    overlay = decode_png(screen.overlay_png)
    assert overlay.size == desktop_shot.size and overlay.tobytes() != decode_png(desktop_shot.png).tobytes()


async def _omniparser_server(payload: object, status: int = 200) -> tuple[web.AppRunner, str, list[dict]]:
    seen: list[dict] = []

    async def parse(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.Response(status=status, text=json.dumps(payload), content_type="application/json")

    app = web.Application()
    app.router.add_post("/parse/", parse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}", seen


async def test_omniparser_client_converts_ratio_boxes_to_pixels() -> None:
    som = encode_png(Image.new("RGB", (400, 200), (1, 2, 3)))
    payload = {
        "som_image_base64": base64.b64encode(som).decode(),
        "parsed_content_list": [
            {"type": "text", "bbox": [0.1, 0.2, 0.5, 0.3], "interactivity": False, "content": "Total: 12",
             "source": "box_ocr_content_ocr"},
            {"type": "icon", "bbox": [0.75, 0.5, 0.8, 0.6], "interactivity": True, "content": "gear icon"},
        ],
        "latency": 0.4,
    }
    runner, url, seen = await _omniparser_server(payload)
    try:
        png = blank_png((400, 200))
        screen = await OmniParserClient(url).parse(png)
    finally:
        await runner.cleanup()
    assert base64.b64decode(seen[0]["base64_image"]) == png
    assert [(e.type, e.box, e.content, e.interactivity) for e in screen.elements] == [
        ("text", (40, 40, 200, 60), "Total: 12", False), ("icon", (300, 100, 320, 120), "gear icon", True)]
    assert screen.elements[0].source == "omniparser:box_ocr_content_ocr"
    assert screen.overlay_png == som


async def test_omniparser_errors_are_one_line_parser_errors() -> None:
    runner, url, _ = await _omniparser_server({"detail": "boom"}, status=500)
    try:
        with pytest.raises(ParserError, match="HTTP 500"):
            await OmniParserClient(url).parse(blank_png((50, 50)))
        await runner.cleanup()
        with pytest.raises(ParserError, match="unreachable"):
            await OmniParserClient(url, timeout=5).parse(blank_png((50, 50)))
    finally:
        await runner.cleanup()
    runner, url, _ = await _omniparser_server({"nothing": []})
    try:
        with pytest.raises(ParserError, match="parsed_content_list"):
            await OmniParserClient(url).parse(blank_png((50, 50)))
    finally:
        await runner.cleanup()


def test_png_round_trip_helper_is_lossless() -> None:
    buf = io.BytesIO()
    Image.new("RGB", (3, 3), (9, 9, 9)).save(buf, "PNG")
    assert decode_png(buf.getvalue()).getpixel((1, 1)) == (9, 9, 9)


async def test_a_failing_ocr_engine_is_a_parser_error(rendered: RenderedScreen) -> None:
    class Broken:
        name = "broken"

        def words(self, img: Image.Image) -> list:  # type: ignore[type-arg]
            raise RuntimeError("tesseract failed: no such language")

    with pytest.raises(ParserError, match="no such language"):
        await LocalUIParser(Broken()).parse(rendered.png)  # type: ignore[arg-type]


def test_strips_are_cut_between_lines_and_read_the_same_words() -> None:
    from PIL import ImageDraw, ImageFont

    from core.ocr import TesseractEngine, quiet_rows, split_rows

    img = Image.new("RGB", (900, 700), "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(22)
    lines = [f"line {i} holds words number {i * 7}" for i in range(12)]
    for i, line in enumerate(lines):
        draw.text((20, 20 + 34 * i), line, fill="black", font=font)  # text only in the top 60 %
    gray = np.asarray(img.convert("L"))
    cuts = split_rows(gray, 2)
    assert len(cuts) == 1
    assert quiet_rows(gray)[cuts[0]] == 0  # between two lines
    assert 150 < cuts[0] < 300  # balanced by text, not at the image's middle (350)
    one = sorted(w.text for w in TesseractEngine(workers=1).words(img))
    two = sorted(w.text for w in TesseractEngine(workers=2).words(img))
    assert one == two and one.count("holds") == 12
