"""The Point tool: ground a description to one spot and star it on the screenshot.

Two ways to ground: ask a pointing model, or match the description's words against the
UI parser's text elements. Pointing models answer in different units, and all are read:
Molmo's `<point x="61.5" y="40.2">` (percent of width and height), `<points x1=.. y1=..>`
(the first pair), Qwen's `{"point_2d": [x, y]}` (pixels), and a bare `(x, y)` read in the
convention the caller names — by default percent when both values are at most 100, else
pixels (the prompt asks for Molmo's percent form, so small bare pairs are read that way).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

__all__ = ["BareConvention", "Convention", "PointAnswer", "parse_point", "text_match"]

Convention = Literal["percent", "pixels", "fraction"]
#: How to read a plain pair: a convention, or "auto" (both ≤ 100 → percent, else pixels).
BareConvention = Literal["auto", "percent", "pixels", "fraction"]

_NUM = r"-?\d+(?:\.\d+)?"
_MOLMO = re.compile(rf'<points?\b[^>]*?\bx1?\s*=\s*"({_NUM})"[^>]*?\by1?\s*=\s*"({_NUM})"', re.I | re.S)
_POINT_2D = re.compile(rf'"point_2d"\s*:\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*\]')
_PAIR = re.compile(rf"[\(\[]\s*({_NUM})\s*,\s*({_NUM})\s*[\)\]]")
_XY = re.compile(rf"\bx\s*[=:]\s*({_NUM})\s*[,;\s]\s*y\s*[=:]\s*({_NUM})", re.I)


class PointAnswer(BaseModel):
    """A grounded point in screenshot pixels, and how it was read."""

    x: float
    y: float
    #: "molmo", "point_2d", "pair", "ocr"
    form: str
    convention: str


@dataclass(frozen=True, slots=True)
class _Raw:
    x: float
    y: float
    form: str
    convention: Convention


def _bare(x: float, y: float, bare: BareConvention) -> Convention:
    if bare != "auto":
        return bare
    return "percent" if x <= 100 and y <= 100 else "pixels"


def _find(text: str, bare: BareConvention) -> _Raw | None:
    if m := _MOLMO.search(text):
        return _Raw(float(m[1]), float(m[2]), "molmo", "percent")
    if m := _POINT_2D.search(text):
        return _Raw(float(m[1]), float(m[2]), "point_2d", "pixels")
    try:
        data = json.loads(text.strip().removeprefix("```json").removeprefix("```").removesuffix("```"))
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("x"), int | float) and isinstance(data.get("y"), int | float):
        x, y = float(data["x"]), float(data["y"])
        return _Raw(x, y, "pair", _bare(x, y, bare))
    if m := (_PAIR.search(text) or _XY.search(text)):
        x, y = float(m[1]), float(m[2])
        return _Raw(x, y, "pair", _bare(x, y, bare))
    return None


def parse_point(text: str, size: tuple[int, int], *, bare: BareConvention = "auto",
                sent_size: tuple[int, int] | None = None) -> PointAnswer | None:
    """The point in `text`, in pixels of an image of `size`; None if there is none or it
    lies outside the image.

    `bare` says how to read a plain pair; `sent_size` is the size of the image the model
    saw, when it was downscaled, so pixel answers are scaled back up.
    """
    raw = _find(text, bare)
    if raw is None:
        return None
    width, height = size
    seen_w, seen_h = sent_size or size
    if raw.convention == "percent":
        if not (0 <= raw.x <= 100 and 0 <= raw.y <= 100):
            return None
        x, y = raw.x / 100 * width, raw.y / 100 * height
    elif raw.convention == "fraction":
        if not (0 <= raw.x <= 1 and 0 <= raw.y <= 1):
            return None
        x, y = raw.x * width, raw.y * height
    else:
        if not (0 <= raw.x <= seen_w and 0 <= raw.y <= seen_h):
            return None
        x, y = raw.x * width / seen_w, raw.y * height / seen_h
    return PointAnswer(x=min(x, width - 1), y=min(y, height - 1), form=raw.form, convention=raw.convention)


_QUOTED = re.compile(r"[\"'“‘]([^\"'”’]{1,80})[\"'”’]")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s-]", " ", text.casefold()).split())


def text_match(description: str, texts: list[str], *, threshold: float = 0.75) -> int | None:
    """Index of the text that best matches the description: its quoted part if it has one,
    else the whole; exact containment first, then the closest above `threshold`."""
    quoted = _QUOTED.search(description)
    target = _norm(quoted[1] if quoted else description)
    if not target:
        return None
    normed = [_norm(t) for t in texts]
    exact = [i for i, t in enumerate(normed) if t == target]
    if exact:
        return exact[0]
    contains = [i for i, t in enumerate(normed) if t and (target in t.split(" ") or f" {target} " in f" {t} ")]
    if contains:
        return min(contains, key=lambda i: len(normed[i]))
    best, best_score = None, threshold
    for i, t in enumerate(normed):
        score = difflib.SequenceMatcher(None, target, t).ratio()
        if score >= best_score:
            best, best_score = i, score
    return best
