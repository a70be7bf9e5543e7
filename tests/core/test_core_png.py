"""core.png: screenshots and pictures encoded fast decode to exactly the pixels given, at a
PNG size close to Pillow's own; banded copies re-compress only the rows that changed."""

from __future__ import annotations

import io
import zlib

import numpy as np
import pytest
from PIL import Image

from core.png import BAND_ROWS, PngBands, encode_png


def _noise(h: int = 150, w: int = 90, seed: int = 3) -> np.ndarray:
    """Blocks of colour with a little noise: compressible like a screen, yet every row differs."""
    rng = np.random.default_rng(seed)
    base = np.repeat(np.repeat(rng.integers(0, 256, (h // 10 + 1, w // 10 + 1, 3)), 10, 0), 10, 1)[:h, :w]
    return (base + rng.integers(0, 3, (h, w, 3))).astype(np.uint8)


def _screen_like() -> np.ndarray:
    """Flat panels, text-like stripes and a gradient: what desktops look like."""
    rng = np.random.default_rng(7)
    screen = np.full((216, 384, 3), 240, np.uint8)
    screen[:24] = (40, 44, 52)
    screen[40:200:12, 20:360] = rng.integers(0, 80, size=(14, 340, 3), dtype=np.uint8)
    screen[:, 300:] = np.linspace(0, 255, 84, dtype=np.uint8)[None, :, None]
    return screen


@pytest.mark.parametrize("level", [1, 2, 3])
def test_round_trip_is_exact(level: int) -> None:
    for pixels in (_screen_like(), np.random.default_rng(1).integers(0, 256, (17, 29, 3), dtype=np.uint8)):
        data = encode_png(pixels, level=level)
        with Image.open(io.BytesIO(data)) as decoded:
            assert decoded.mode == "RGB" and decoded.size == (pixels.shape[1], pixels.shape[0])
            assert np.array_equal(np.asarray(decoded), pixels)


def test_size_is_close_to_pillow_and_views_are_accepted() -> None:
    screen = _screen_like()
    ours = encode_png(screen[:, :, ::-1][:, :, ::-1])  # a strided view, as the server passes
    buffer = io.BytesIO()
    Image.fromarray(screen).save(buffer, format="PNG", compress_level=1)
    assert len(ours) < 2 * len(buffer.getvalue())


def test_refuses_other_shapes() -> None:
    with pytest.raises(ValueError, match=r"cannot write a PNG of an array shaped \(4, 4, 5\)"):
        encode_png(np.zeros((4, 4, 5), np.uint8))


@pytest.mark.parametrize("level", [0, 1, 3, 6])
def test_both_deflate_libraries_write_exact_pngs(level: int) -> None:
    """Levels 1-3 deflate with ISA-L, the others with zlib."""
    arr = _noise()
    data = encode_png(arr, level=level)
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(data))), arr)
    zlib.decompress(_idat(data))  # a complete zlib stream with a correct Adler-32


def _idat(data: bytes) -> bytes:
    pos, out = 8, []
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        if data[pos + 4:pos + 8] == b"IDAT":
            out.append(data[pos + 8:pos + 8 + n])
        pos += 12 + n
    return b"".join(out)


@pytest.mark.parametrize(("top", "rows"), [(0, 1), (0, 150), (BAND_ROWS - 1, 2), (BAND_ROWS, 5), (149, 1), (40, 70)])
def test_patched_bands_decode_to_the_patched_image(top: int, rows: int) -> None:
    arr = _noise()
    bands = PngBands(arr)
    patch = arr[top:top + rows].copy()
    patch[:, 3:9] = (250, 1, 2)
    expected = arr.copy()
    expected[top:top + rows] = patch
    data = bands.png_patched(top, patch)
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(data))), expected)
    zlib.decompress(_idat(data))
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(bands.png()))), arr)  # the base is untouched


def test_a_patch_that_changes_nothing_gives_the_base_png_and_a_misfit_is_refused() -> None:
    arr = _noise()
    bands = PngBands(arr)
    assert bands.png_patched(10, arr[10:20].copy()) == bands.png()
    with pytest.raises(ValueError, match="does not fit"):
        bands.png_patched(145, arr[:10])

