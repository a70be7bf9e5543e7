"""Text-span grounding: find phrases among the words OCR reads off a screenshot.

The words come from `core.ocr` (tesseract), their boxes scaled from screenshot pixels to
screen pixels, so a selection lands where the text is even when the screenshot was taken
at another resolution. Matching is done here, deterministically, rather than by asking a
model to pick word ids.
"""

from __future__ import annotations

import difflib
import hashlib
import io
from collections import OrderedDict
from collections.abc import Sequence

from PIL import Image

from agent_s3.points import Point, clamp
from core.ocr import OcrUnavailableError, Word, normalized, tesseract_words

__all__ = ["OcrError", "OcrReader", "Word", "find_phrase", "span_points"]

_MATCH_THRESHOLD = 0.8


class OcrError(RuntimeError):
    """OCR could not run, or a phrase is not on screen; the message is feedback."""


def _similarity(window: Sequence[Word], tokens: Sequence[str]) -> float:
    got = " ".join(w.norm for w in window)
    return difflib.SequenceMatcher(None, got, " ".join(tokens)).ratio()


def find_phrase(words: Sequence[Word], phrase: str, start_at: int = 0) -> tuple[int, int] | None:
    """(first, last) word indices of the best match of `phrase` at or after `start_at`.

    Exact token matches win; otherwise the closest window above a similarity threshold;
    ties go to the earliest occurrence.
    """
    tokens = [t for t in (normalized(p) for p in phrase.split()) if t]
    if not tokens:
        return None
    n = len(tokens)
    best: tuple[float, int] | None = None
    for i in range(start_at, len(words) - n + 1):
        window = words[i : i + n]
        if [w.norm for w in window] == tokens:
            return i, i + n - 1
        score = _similarity(window, tokens)
        if score >= _MATCH_THRESHOLD and (best is None or score > best[0]):
            best = (score, i)
    return (best[1], best[1] + n - 1) if best else None


def span_points(
    words: Sequence[Word], starting_phrase: str, ending_phrase: str, screen: tuple[int, int]
) -> tuple[Point, Point]:
    """Where to press (left edge of the span's first word) and release (right edge of its last)."""
    start = find_phrase(words, starting_phrase)
    if start is None:
        raise OcrError(f"The phrase {starting_phrase!r} was not found in the text on screen.")
    end = find_phrase(words, ending_phrase, start_at=start[0])
    if end is None:
        raise OcrError(f"The phrase {ending_phrase!r} was not found on screen after {starting_phrase!r}.")
    first, last = words[start[0]], words[end[1]]
    p0 = clamp(first.left, first.top + first.height / 2, screen)
    p1 = clamp(last.left + last.width, last.top + last.height / 2, screen)
    return p0, p1


class OcrReader:
    """Runs the `tesseract` command on PNG screenshots, caching the last few results."""

    def __init__(
        self,
        *,
        binary: str = "tesseract",
        psm: int = 6,
        language: str = "eng",
        timeout: float = 30.0,
        cache_size: int = 4,
    ) -> None:
        self.binary = binary
        self.psm = psm
        self.language = language
        self.timeout = timeout
        self._cache: OrderedDict[tuple[str, int, tuple[int, int]], list[Word]] = OrderedDict()
        self._cache_size = cache_size

    async def words(self, png: bytes, screen: tuple[int, int], *, psm: int | None = None) -> list[Word]:
        """The words on the screenshot, boxes in screen pixels."""
        mode = psm or self.psm
        key = (hashlib.sha256(png).hexdigest(), mode, screen)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        with Image.open(io.BytesIO(png)) as img:
            size = img.size
        try:
            words = await tesseract_words(png, psm=mode, lang=self.language, timeout=self.timeout,
                                          binary=self.binary, scale=(screen[0] / size[0], screen[1] / size[1]))
        except (OcrUnavailableError, RuntimeError) as e:
            raise OcrError(str(e)) from None
        self._cache[key] = words
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return words

    async def span(
        self, png: bytes, screen: tuple[int, int], starting_phrase: str, ending_phrase: str
    ) -> tuple[Point, Point]:
        """Press and release points selecting from `starting_phrase` to `ending_phrase`.

        Tries the uniform-block layout first (best on editors and documents), then sparse
        text (scattered labels) before giving up.
        """
        last: OcrError | None = None
        for mode in dict.fromkeys((self.psm, 11)):
            try:
                return span_points(
                    await self.words(png, screen, psm=mode), starting_phrase, ending_phrase, screen
                )
            except OcrError as e:
                if "tesseract" in str(e):
                    raise
                last = e
        assert last is not None
        raise last
