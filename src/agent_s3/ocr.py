"""Text-span grounding: find phrases among the words tesseract reads off a screenshot.

Word boxes are scaled from screenshot pixels to screen pixels, so a selection lands where
the text is even when the screenshot was taken at another resolution. Matching is done
here, deterministically, rather than by asking a model to pick word ids.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import io
import os
import re
import shutil
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image

from agent_s3.points import Point, clamp

__all__ = ["OcrError", "OcrReader", "Word", "find_phrase", "parse_tsv", "span_points"]

_EDGE = re.compile(r"^\W+|\W+$")
_MATCH_THRESHOLD = 0.8


class OcrError(RuntimeError):
    """OCR could not run, or a phrase is not on screen; the message is feedback."""


@dataclass(frozen=True, slots=True)
class Word:
    """One word read from the screen, with its box in screen pixels."""

    text: str
    left: int
    top: int
    width: int
    height: int
    #: (block, paragraph, line) so callers can tell line breaks.
    line: tuple[int, int, int] = (0, 0, 0)

    @property
    def norm(self) -> str:
        return _norm(self.text)


def _norm(token: str) -> str:
    return _EDGE.sub("", token.lower())


def parse_tsv(tsv: str, scale: tuple[float, float] = (1.0, 1.0)) -> list[Word]:
    """Words (level 5 rows with text) from tesseract's TSV, boxes multiplied by `scale`."""
    words: list[Word] = []
    sx, sy = scale
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5" or not cols[11].strip():
            continue
        try:
            left, top, width, height = (int(c) for c in cols[6:10])
            line = (int(cols[2]), int(cols[3]), int(cols[4]))
        except ValueError:
            continue
        words.append(
            Word(
                cols[11].strip(),
                round(left * sx),
                round(top * sy),
                round(width * sx),
                round(height * sy),
                line,
            )
        )
    return words


def _similarity(window: Sequence[Word], tokens: Sequence[str]) -> float:
    got = " ".join(w.norm for w in window)
    return difflib.SequenceMatcher(None, got, " ".join(tokens)).ratio()


def find_phrase(words: Sequence[Word], phrase: str, start_at: int = 0) -> tuple[int, int] | None:
    """(first, last) word indices of the best match of `phrase` at or after `start_at`.

    Exact token matches win; otherwise the closest window above a similarity threshold;
    ties go to the earliest occurrence.
    """
    tokens = [t for t in (_norm(p) for p in phrase.split()) if t]
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
        if shutil.which(self.binary) is None:
            raise OcrError(f"text grounding needs the {self.binary!r} command; install tesseract-ocr")
        with Image.open(io.BytesIO(png)) as img:
            size = img.size
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            "stdin",
            "stdout",
            "--psm",
            str(mode),
            "-l",
            self.language,
            "tsv",
            # One OpenMP thread: tesseract's threads contend badly on a busy machine
            # (measured 4-6x slower with the default on 2 busy cores).
            env={**os.environ, "OMP_THREAD_LIMIT": os.environ.get("OMP_THREAD_LIMIT", "1")},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate(png)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise OcrError(f"tesseract took longer than {self.timeout:.0f} s") from None
        if proc.returncode != 0:
            raise OcrError(f"tesseract failed: {err.decode(errors='replace').strip()[:300]}")
        words = parse_tsv(out.decode("utf-8", errors="replace"), (screen[0] / size[0], screen[1] / size[1]))
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
