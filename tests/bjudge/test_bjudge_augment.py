"""Augmented transitions checked pixel by pixel."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from PIL import Image

from bjudge import AugmentConfig, FrameMemo, augment, augment_transition, load_frame
from bjudge.augment import marker_label
from core.images import MARKER_COLOURS, Box, decode_png, encode_png
from core.trajectory import PointerEvent

W, H = 800, 500
FULL = AugmentConfig(longest_side=None, zoom_size=100, zoom_scale=2.0, zoom_resample="nearest")


def _gradient(w: int = W, h: int = H) -> bytes:
    """Every pixel distinct enough to locate a crop: red = x, green = y (mod 256), blue fixed."""
    x = np.arange(w, dtype=np.uint16)[None, :].repeat(h, 0)
    y = np.arange(h, dtype=np.uint16)[:, None].repeat(w, 1)
    arr = np.stack([(x % 256), (y % 256), np.full_like(x, 77)], axis=-1).astype(np.uint8)
    return encode_png(Image.fromarray(arr, "RGB"))


def _grey(w: int = W, h: int = H) -> bytes:
    return encode_png(Image.new("RGB", (w, h), (128, 128, 128)))


def _run(pointer: list[PointerEvent], cfg: AugmentConfig = FULL, before: bytes | None = None,
         after: bytes | None = None):
    b = load_frame(before or _grey(), cfg.longest_side)
    a = load_frame(after or _gradient(), cfg.longest_side)
    return augment(b, a, pointer, cfg)


@pytest.mark.parametrize("kind", ["click", "move"])
def test_marker_colour_sits_on_the_pointer(kind: str) -> None:
    out = _run([PointerEvent(kind=kind, x=300, y=200)])
    before = decode_png(out.before)
    assert before.getpixel((300, 200)) == MARKER_COLOURS[kind]
    assert before.getpixel((300 + FULL.marker_radius, 200)) == MARKER_COLOURS[kind]  # the ring
    assert before.getpixel((100, 100)) == (128, 128, 128)  # elsewhere untouched


def test_drag_draws_move_and_drag_markers_joined_by_a_green_line() -> None:
    out = _run([PointerEvent(kind="move", x=100, y=100), PointerEvent(kind="drag", x=500, y=100)])
    before = decode_png(out.before)
    assert before.getpixel((100, 100)) == MARKER_COLOURS["move"]
    assert before.getpixel((500, 100)) == MARKER_COLOURS["drag"]
    assert before.getpixel((300, 100)) == MARKER_COLOURS["drag"]  # the line between them
    assert out.zoom_box is not None and out.zoom_box.centre == (500, 100)  # zoom on the DragTo


def test_zoom_is_centred_on_the_final_pointer_and_enlarged_from_full_pixels() -> None:
    out = _run([PointerEvent(kind="click", x=400, y=250)])
    assert out.zoom_box is not None and out.zoom is not None
    box = out.zoom_box
    assert (box.width, box.height) == (100, 100) and box.centre == (400, 250)
    zoom = decode_png(out.zoom)
    assert zoom.size == (200, 200)
    # nearest-neighbour x2: zoom pixel (2i, 2j) is full-screen pixel (left + i, top + j)
    for i, j in [(0, 0), (50, 50), (99, 99), (10, 70)]:
        assert zoom.getpixel((2 * i, 2 * j)) == ((box.left + i) % 256, (box.top + j) % 256, 77)


@pytest.mark.parametrize(("x", "y", "left", "top"), [(5, 5, 0, 0), (W + 300, -40, W - 100, 0), (W - 1, H - 1, W - 100, H - 100)])
def test_zoom_and_marker_clip_at_the_screen_edges(x: int, y: int, left: int, top: int) -> None:
    out = _run([PointerEvent(kind="click", x=x, y=y)])
    assert out.zoom_box is not None
    assert (out.zoom_box.left, out.zoom_box.top) == (left, top)
    assert (out.zoom_box.width, out.zoom_box.height) == (100, 100)
    clipped = (min(max(x, 0), W - 1), min(max(y, 0), H - 1))
    assert decode_png(out.before).getpixel(clipped) == MARKER_COLOURS["click"]


def test_outline_marks_the_zoomed_region_on_the_after_screen() -> None:
    out = _run([PointerEvent(kind="click", x=400, y=250)])
    after = decode_png(out.after)
    box = out.zoom_box
    assert box is not None
    red = FULL.outline_colour
    assert after.getpixel((box.left, box.top + 50)) == red
    assert after.getpixel((box.right - 1, box.top + 50)) == red
    assert after.getpixel((box.left + 50, box.bottom - 1)) == red
    inside = (box.left + 50, box.top + 50)
    assert after.getpixel(inside) == (inside[0] % 256, inside[1] % 256, 77)  # inside untouched


def test_non_pointer_actions_without_the_change_zoom_get_no_marker_zoom_or_outline() -> None:
    out = _run([], FULL.model_copy(update={"change_zoom": False}))
    assert out.zoom is None and out.zoom_box is None and out.zoom_on is None
    assert decode_png(out.after).tobytes() == decode_png(_gradient()).tobytes()
    assert decode_png(out.before).getcolors() == [(W * H, (128, 128, 128))]


def _with_text_at(x: int, y: int, base: bytes | None = None) -> bytes:
    """A grey screen with a small dark block of "text" at (x, y)."""
    img = decode_png(base or _grey()).convert("RGB")
    img.paste((20, 20, 20), (x, y, x + 40, y + 12))
    return encode_png(img)


@pytest.mark.parametrize(("x", "y"), [(600, 400), (10, 10), (380, 240)])
def test_a_pointerless_step_is_zoomed_where_the_screen_changed_most(x: int, y: int) -> None:
    out = _run([], before=_grey(), after=_with_text_at(x, y))
    box = out.zoom_box
    assert out.zoom_on == "change" and out.zoom is not None and box is not None
    assert (box.right - box.left, box.bottom - box.top) == (100, 100)
    assert box.left <= x and x + 40 <= box.right and box.top <= y and y + 12 <= box.bottom  # the change is inside
    zoom = decode_png(out.zoom)
    assert zoom.size == (200, 200)
    assert zoom.getpixel((2 * (x - box.left) + 1, 2 * (y - box.top) + 1)) == (20, 20, 20)  # full pixels, enlarged
    assert decode_png(out.after).getpixel((box.left, box.top + 50)) == FULL.outline_colour
    assert decode_png(out.before).getcolors() == [(W * H, (128, 128, 128))]  # no marker without a pointer


def test_the_larger_of_two_changes_wins_and_compression_noise_is_ignored() -> None:
    before = np.full((H, W, 3), 128, np.uint8)
    after = before.copy()
    after[:, :, 0] += 3  # noise below the threshold everywhere
    after[50:60, 50:60] = 0  # a small change
    after[300:360, 500:580] = 0  # a larger one
    out = _run([], before=encode_png(Image.fromarray(before)), after=encode_png(Image.fromarray(after)))
    assert out.zoom_box is not None and out.zoom_box.left <= 500 and out.zoom_box.right >= 580


def test_an_unchanged_pointerless_step_gets_no_zoom() -> None:
    out = _run([], before=_grey(), after=_grey())
    assert out.zoom is None and out.zoom_on is None


def test_downscale_shrinks_screens_but_the_zoom_keeps_full_detail() -> None:
    cfg = AugmentConfig(longest_side=400, zoom_size=100, zoom_scale=2.0, zoom_resample="nearest")
    out = _run([PointerEvent(kind="click", x=400, y=250)], cfg)
    before, after, zoom = decode_png(out.before), decode_png(out.after), decode_png(out.zoom or b"")
    assert before.size == after.size == (400, 250)
    assert zoom.size == (200, 200)
    assert before.getpixel((200, 125)) == MARKER_COLOURS["click"]  # marker at the scaled point
    assert after.getpixel((175, 125)) == cfg.outline_colour  # outline at the scaled box edge (350/2)
    box = out.zoom_box
    assert box is not None and zoom.getpixel((0, 0)) == (box.left % 256, box.top % 256, 77)


def test_memo_decodes_a_shared_screenshot_once() -> None:
    memo = FrameMemo(None)
    shots = [_grey(), _gradient(), _grey(W, H - 1)]
    for before, after in itertools.pairwise(shots):
        augment(memo.get(before), memo.get(after), [PointerEvent(kind="click", x=1, y=1)], FULL)
    assert memo.decodes == 3


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "P"])
def test_fast_png_round_trips_exactly_and_stays_compact(mode: str) -> None:
    from core.png import encode_png

    img = decode_png(_gradient()).convert(mode)
    data = encode_png(img)
    back = Image.open(__import__("io").BytesIO(data))
    expected = img.convert("RGB") if mode == "P" else img
    assert back.mode == expected.mode and back.tobytes() == expected.tobytes()
    pillow = __import__("io").BytesIO()
    expected.save(pillow, format="PNG", compress_level=1)
    assert len(data) < 1.5 * len(pillow.getvalue())


def test_augment_transition_works_from_png_bytes_with_defaults_at_native_size() -> None:
    out = augment_transition(_grey(1920, 1080), _grey(1920, 1080), [PointerEvent(kind="click", x=960, y=540)])
    assert decode_png(out.before).size == decode_png(out.after).size == (1920, 1080)
    assert decode_png(out.before).getpixel((960, 540)) == MARKER_COLOURS["click"]
    assert out.zoom is not None and decode_png(out.zoom).size == (510, 510)


@pytest.mark.parametrize("rows", [[0], [31], [32], [31, 32], [H - 1], [5, 200, H - 1], []])
def test_banded_png_variants_decode_exactly(rows: list[int]) -> None:
    from core.png import PngBands

    base = decode_png(_gradient())
    bands = PngBands(base)
    assert decode_png(bands.png()).tobytes() == base.tobytes()
    variant = base.copy()
    for y in rows:
        variant.putpixel((7, y), (1, 2, 3))
    data = bands.png_of(variant)
    assert decode_png(data).tobytes() == variant.tobytes()
    assert (data == bands.png()) == (not rows)


def test_banded_png_of_a_different_size_still_encodes() -> None:
    from core.png import PngBands

    other = Image.new("RGB", (10, 10), (9, 9, 9))
    assert decode_png(PngBands(decode_png(_grey())).png_of(other)).tobytes() == other.tobytes()


def test_adler32_of_joined_bands_is_combined_exactly() -> None:
    import random
    import zlib

    from core.png import _adler32_combine

    rng = random.Random(5)
    for _ in range(100):
        a, b = rng.randbytes(rng.randrange(0, 3000)), rng.randbytes(rng.randrange(0, 150_000))
        assert _adler32_combine(zlib.adler32(a), zlib.adler32(b), len(b)) == zlib.adler32(a + b)


@pytest.mark.parametrize("pointer", [
    [PointerEvent(kind="click", x=5, y=3)],
    [PointerEvent(kind="click", x=W - 2, y=H - 1)],
    [PointerEvent(kind="move", x=30, y=470), PointerEvent(kind="drag", x=760, y=20)],
    [PointerEvent(kind="move", x=400, y=40)],
])
def test_markers_drawn_on_a_strip_equal_markers_drawn_on_the_whole_shown_copy(pointer: list[PointerEvent]) -> None:
    """Drawing only on the rows a marker reaches must not change a pixel of the result
    (clipping at the edges and the label's placement included)."""
    from core.images import draw_marker

    cfg = AugmentConfig(longest_side=600, zoom_size=100)
    frame = load_frame(_gradient(), cfg.longest_side)
    out = augment(frame, load_frame(_grey(), cfg.longest_side), pointer, cfg)
    expected = frame.small
    s = frame.scale
    previous = None
    for event in pointer:
        line_from = (previous.x * s, previous.y * s) if event.kind == "drag" and previous else None
        x, y = min(max(event.x, 0), W - 1) * s, min(max(event.y, 0), H - 1) * s
        expected = draw_marker(expected, x, y, event.kind, label=marker_label(event.kind),
                               radius=cfg.marker_radius, line_from=line_from)
        if line_from is not None and previous is not None:
            expected = draw_marker(expected, *line_from, previous.kind, label=marker_label(previous.kind),
                                   radius=cfg.marker_radius)
        previous = event
    assert decode_png(out.before).tobytes() == expected.tobytes()


def test_outline_drawn_on_the_box_rows_equals_core_draw_outline() -> None:
    from core.images import draw_outline

    cfg = AugmentConfig(longest_side=600, zoom_size=150, outline_width=4)
    after = load_frame(_gradient(), cfg.longest_side)
    out = augment(load_frame(_grey(), cfg.longest_side), after, [PointerEvent(kind="click", x=790, y=10)], cfg)
    assert out.zoom_box is not None
    s = after.scale
    box = out.zoom_box
    shown = Box(round(box.left * s), round(box.top * s), round(box.right * s), round(box.bottom * s))
    expected = draw_outline(after.small, shown, colour=cfg.outline_colour, width=4)
    assert decode_png(out.after).tobytes() == expected.tobytes()


def test_a_change_of_a_few_pixels_still_gets_its_zoom() -> None:
    before = np.full((H, W, 3), 200, np.uint8)
    after = before.copy()
    after[420:423, 710:716] = 0  # a minus sign
    out = _run([], before=encode_png(Image.fromarray(before)), after=encode_png(Image.fromarray(after)))
    box = out.zoom_box
    assert box is not None and box.left <= 710 and box.right >= 716 and box.top <= 420 and box.bottom >= 423
    assert abs(box.centre[0] - 713) <= 2 and abs(box.centre[1] - 421) <= 2  # centred on the change
