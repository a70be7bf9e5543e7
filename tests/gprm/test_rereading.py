"""Between steps only the changed rows are read again; the rest keeps its words."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from core.ocr import TesseractEngine, Word
from gprm import LocalUIParser
from gprm.rereading import changed_bands


@dataclass
class RecordingEngine:
    """Tesseract, remembering the size of every image it was asked to read."""

    inner: TesseractEngine = field(default_factory=TesseractEngine)
    sizes: list[tuple[int, int]] = field(default_factory=list)
    name: str = "tesseract"

    def words(self, img: Image.Image) -> list[Word]:
        self.sizes.append(img.size)
        return self.inner.words(img)


def _page(lines: list[str]) -> Image.Image:
    img = Image.new("RGB", (900, 600), "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(24)
    for i, line in enumerate(lines):
        draw.text((30, 30 + 50 * i), line, fill="black", font=font)
    return img


def test_changed_bands_cover_the_change_and_stop_at_quiet_rows() -> None:
    before = np.asarray(_page(["alpha beta gamma", "delta epsilon"]).convert("L"))
    assert changed_bands(before, before) == []
    after = np.asarray(_page(["alpha beta gamma", "delta epsilon", "zeta eta theta"]).convert("L"))
    bands = changed_bands(before, after)
    assert len(bands) == 1
    top, bottom = bands[0]
    ink = np.flatnonzero((before != after).any(axis=1))
    second_line = np.flatnonzero((before[:, :] < 128).any(axis=1) & (np.arange(600) < 125))
    assert top <= ink.min() and bottom > ink.max()  # the whole change
    assert top > second_line.max()  # but not the line above it


def test_a_new_line_is_read_alone_and_the_old_words_are_kept() -> None:
    engine = RecordingEngine()
    parser = LocalUIParser(engine, controls=False, trim_background=False)
    first = parser.parse_sync(_page(["Quarterly report draft", "Invoice number 48213"]))
    assert {e.content for e in first.elements} == {"Quarterly report draft", "Invoice number 48213"}
    engine.sizes.clear()
    second = parser.parse_sync(_page(["Quarterly report draft", "Invoice number 48213", "Water the plants"]))
    assert {e.content for e in second.elements} == {"Quarterly report draft", "Invoice number 48213",
                                                     "Water the plants"}
    assert len(engine.sizes) == 1 and engine.sizes[0][1] < 100  # one strip, not the page
    engine.sizes.clear()
    parser.parse_sync(_page(["Quarterly report draft", "Invoice number 48213", "Water the plants"]))
    assert engine.sizes == []  # nothing changed, nothing read


def test_a_mostly_new_screen_is_read_whole() -> None:
    engine = RecordingEngine()
    parser = LocalUIParser(engine, controls=False, trim_background=False)
    parser.parse_sync(_page(["one", "two"]))
    engine.sizes.clear()
    screen = parser.parse_sync(_page([f"line number {i}" for i in range(11)]))
    assert engine.sizes == [(900, 600)] and len(screen.elements) == 11
