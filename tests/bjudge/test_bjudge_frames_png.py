"""Frames: decoding, shrinking and the banded PNG of the shown copy, checked on pixels."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from PIL import Image

from bjudge.frames import decode_rgb, load_frame, shrink
from core.images import decode_png, encode_png


def _noise(h: int = 150, w: int = 90, seed: int = 3) -> np.ndarray:
    """Blocks of colour with a little noise: compressible like a screen, yet every row differs."""
    rng = np.random.default_rng(seed)
    base = np.repeat(np.repeat(rng.integers(0, 256, (h // 10 + 1, w // 10 + 1, 3)), 10, 0), 10, 1)[:h, :w]
    return (base + rng.integers(0, 3, (h, w, 3))).astype(np.uint8)


@pytest.mark.parametrize("mode", ["RGBA", "L", "P", "RGB"])
def test_decode_gives_rgb_arrays_as_pillow_converts_them(mode: str) -> None:
    img = Image.fromarray(_noise()).convert(mode)
    data = encode_png(img)
    assert np.array_equal(decode_rgb(data), np.asarray(img.convert("RGB")))


def test_decode_reads_jpeg_and_refuses_bytes_that_are_no_image() -> None:
    buf = io.BytesIO()
    Image.fromarray(_noise()).save(buf, format="JPEG", quality=95)
    assert decode_rgb(buf.getvalue()).shape == (150, 90, 3)
    with pytest.raises(Exception, match=r"identify|cannot"):
        decode_rgb(b"certainly not an image")


def test_shrink_keeps_the_aspect_and_never_enlarges() -> None:
    arr = np.zeros((1080, 1920, 3), np.uint8)
    assert shrink(arr, 1280).shape == (720, 1280, 3)
    assert shrink(arr, 4000) is arr and shrink(arr, None) is arr


@pytest.mark.parametrize("side", [1280, 960, 640, 400])
def test_shrink_averages_every_source_pixel_like_area_averaging(side: int) -> None:
    """On noise, sampling without averaging lands far from the area average (~80 grey
    levels on average); the shrink must stay close to it at every ratio."""
    noise = np.random.default_rng(1).integers(0, 256, (1080, 1920, 3)).astype(np.uint8)
    small = shrink(noise, side)
    size = (small.shape[1], small.shape[0])
    area = cv2.resize(noise, size, interpolation=cv2.INTER_AREA).astype(int)
    sampled = cv2.resize(noise, size, interpolation=cv2.INTER_NEAREST).astype(int)
    assert small.shape[1] == side
    assert np.abs(small - area).mean() <= 15 < np.abs(sampled - area).mean()


def test_frame_keeps_full_pixels_and_shows_the_shrunk_copy() -> None:
    data = encode_png(Image.fromarray(_noise(300, 600)))
    frame = load_frame(data, 300)
    assert frame.size == (600, 300) and frame.shown_size == (300, 150) and frame.downscaled
    assert frame.full.size == (600, 300) and frame.small.size == (300, 150)
    assert np.array_equal(np.asarray(decode_png(frame.bands.png())), frame.shown)
    same = load_frame(data, None)
    assert not same.downscaled and same.scale == 1.0
