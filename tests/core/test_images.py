from PIL import Image

from core.images import (
    MARKER_COLOURS,
    Box,
    decode_png,
    downscale,
    draw_marker,
    draw_outline,
    encode_png,
    zoom_box,
    zoom_crop,
)


def _grey(w: int = 400, h: int = 300) -> Image.Image:
    return Image.new("RGB", (w, h), (128, 128, 128))


def test_png_round_trip_keeps_pixels() -> None:
    img = _grey()
    img.putpixel((5, 7), (1, 2, 3))
    back = decode_png(encode_png(img))
    assert back.size == img.size and back.getpixel((5, 7)) == (1, 2, 3)


def test_downscale_limits_longest_side_and_never_enlarges() -> None:
    assert downscale(_grey(1920, 1080), 960).size == (960, 540)
    assert downscale(_grey(200, 100), 960).size == (200, 100)


def test_marker_colour_at_pointer_per_kind() -> None:
    for kind, colour in MARKER_COLOURS.items():
        out = draw_marker(_grey(), 100, 120, kind)  # type: ignore[arg-type]
        assert out.getpixel((100, 120)) == colour
        assert _grey().getpixel((100, 120)) == (128, 128, 128)


def test_marker_clips_at_screen_edge() -> None:
    out = draw_marker(_grey(), -50, 5000, "click")
    assert out.getpixel((0, 299)) == MARKER_COLOURS["click"]


def test_drag_line_joins_move_and_drag_points() -> None:
    out = draw_marker(_grey(), 300, 100, "drag", line_from=(100, 100))
    assert out.getpixel((200, 100)) == MARKER_COLOURS["drag"]


def test_zoom_box_centred_then_shifted_inside() -> None:
    assert zoom_box(1920, 1080, 960, 540, 300) == Box(810, 390, 1110, 690)
    assert zoom_box(1920, 1080, 5, 1075, 300) == Box(0, 780, 300, 1080)
    assert zoom_box(200, 100, 50, 50, 300) == Box(0, 0, 200, 100)


def test_zoom_crop_enlarges_the_region_around_pointer() -> None:
    img = _grey(1000, 800)
    img.putpixel((500, 400), (255, 255, 0))
    crop, box = zoom_crop(img, 500, 400, size=100, scale=2.0)
    assert crop.size == (200, 200) and box == Box(450, 350, 550, 450)
    assert crop.getpixel((100, 100))[0] > 200 and crop.getpixel((100, 100))[2] < 100


def test_outline_drawn_on_box_edge_only() -> None:
    out = draw_outline(_grey(), Box(10, 20, 110, 120), colour=(0, 255, 0), width=2)
    assert out.getpixel((10, 50)) == (0, 255, 0)
    assert out.getpixel((109, 50)) == (0, 255, 0)
    assert out.getpixel((60, 70)) == (128, 128, 128)
