"""Reading only what changed: between two steps of a rollout most of the screen stays the
same, so the words of unchanged rows are kept and only the changed bands are read again.

Bands are grown to quiet rows (no text edges) so no line of text is cut in half; if the
changed bands cover more than `max_fraction` of the screen, everything is read again; many
small bands are read as one span.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from PIL import Image

from core.ocr import Word, quiet_rows

__all__ = ["WordMemo", "changed_bands"]

#: A pixel counts as changed when its grey level moves by more than this.
CHANGE_LEVEL = 12


def _grow(top: int, bottom: int, quiet: np.ndarray, reach: int) -> tuple[int, int]:
    height = quiet.shape[0]
    up = top
    while up > 0 and top - up < reach and not quiet[up - 1]:
        up -= 1
    down = bottom
    while down < height and down - bottom < reach and not quiet[down]:
        down += 1
    return max(0, up - 2), min(height, down + 2)


def changed_bands(before: np.ndarray, after: np.ndarray, *, reach: int = 60,
                  max_edges: int = 6) -> list[tuple[int, int]]:
    """Row ranges [top, bottom) of `after` that differ from `before`, grown to quiet rows
    and merged where they touch."""
    rows = np.flatnonzero((np.abs(after.astype(np.int16) - before.astype(np.int16)) > CHANGE_LEVEL).any(axis=1))
    if rows.size == 0:
        return []
    quiet = quiet_rows(after) <= max_edges
    runs: list[tuple[int, int]] = []
    start = prev = int(rows[0])
    for r in rows[1:]:
        r = int(r)
        if r > prev + 1:
            runs.append((start, prev + 1))
            start = r
        prev = r
    runs.append((start, prev + 1))
    grown = sorted(_grow(t, b, quiet, reach) for t, b in runs)
    merged = [grown[0]]
    for top, bottom in grown[1:]:
        if top <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], bottom))
        else:
            merged.append((top, bottom))
    return merged


@dataclass
class _Seen:
    gray: np.ndarray
    words: list[Word]


class WordMemo:
    """The last screen's words; `read` re-reads only the bands that changed since."""

    def __init__(self, *, max_fraction: float = 0.5, max_bands: int = 3) -> None:
        self.max_fraction = max_fraction
        #: More bands than this are read as one span (each read costs a process start).
        self.max_bands = max_bands
        self._seen: _Seen | None = None
        self._lock = threading.Lock()
        self._line_base = 0
        #: Rows read by the last call (for tests and benchmarks).
        self.last_rows_read = 0

    def _fresh_lines(self, words: list[Word]) -> list[Word]:
        self._line_base += 1_000_000
        return [Word(w.text, w.box, w.line + self._line_base, w.score) for w in words]

    def read(self, img: Image.Image, gray: np.ndarray,
             read_all: Callable[[Image.Image], list[Word]],
             read_band: Callable[[Image.Image], list[Word]]) -> list[Word]:
        """Words of `img` in screen pixels; `read_all` reads a whole screen, `read_band` a strip."""
        with self._lock:
            seen = self._seen
            bands = changed_bands(seen.gray, gray) if seen is not None and seen.gray.shape == gray.shape else None
            if bands and len(bands) > self.max_bands:
                bands = [(bands[0][0], bands[-1][1])]
            if bands is None or sum(b - t for t, b in bands) > self.max_fraction * gray.shape[0]:
                words = self._fresh_lines(read_all(img))
                self.last_rows_read = gray.shape[0]
            else:
                assert seen is not None
                kept = [w for w in seen.words if not any(w.box[1] < b and w.box[3] > t for t, b in bands)]
                fresh: list[Word] = []
                for top, bottom in bands:
                    strip = read_band(img.crop((0, top, img.width, bottom)))
                    fresh += [Word(w.text, (w.box[0], w.box[1] + top, w.box[2], w.box[3] + top), w.line, w.score)
                              for w in strip]
                words = kept + self._fresh_lines(fresh)
                self.last_rows_read = sum(b - t for t, b in bands)
            self._seen = _Seen(gray, words)
            return words
