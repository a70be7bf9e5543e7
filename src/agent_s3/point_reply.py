"""Reading a grounding model's reply as exactly one point, strictly.

A point that is guessed clicks the wrong thing with no error, so a reply must name one
unambiguous point inside the space it was asked in; anything else is a `PointReplyError`
whose message says what was wrong. Forms are tried from the most explicit to the least,
and the first form the reply uses decides:

1. marked answers: ``<point>x y</point>``, UI-TARS ``<|box_start|>(x,y)<|box_end|>`` and
   ``start_box='(x,y)'``, ``click(x, y)``, JSON ``{"x": .., "y": ..}``, ``x=.., y=..``;
2. bracketed pairs ``(x, y)`` / ``[x, y]``, or boxes ``[x1, y1, x2, y2]`` (their centre);
3. a bare ``x, y`` pair in prose, after size mentions such as ``1920x1080`` are removed.

Several different points in the deciding form are ambiguous, except that the origin
(0, 0) and the space's far corner, which the prompt itself names, are not taken for the
answer when another point is given. Numbers in other words ("the 2nd button in row 3")
are never read as coordinates.

Which way round and in which units a model states points comes from its profile, never
from the size of the numbers (`convention`): ``xy`` (x first, in the space asked) or
``yx`` (Gemini's ``{"point": [y, x]}`` and ``{"box_2d": [ymin, xmin, ymax, xmax]}``, 0-1000).
A reply in the other model's form is refused, and so is a point of fractions below 1 in a
space of pixels or thousandths, such as ``(0.851, 0.844)``: read as pixels it would click
the corner.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from core.replies import json_chunks, key_name, strip_reasoning

__all__ = ["MAX_COORDINATE", "PointOrder", "PointReplyError", "read_point"]

#: How a model orders a point: x first (most models) or y first (Gemini, 0-1000).
PointOrder = Literal["xy", "yx"]

#: No screen or model coordinate space comes near this; a larger number is a malformed reply
#: (as a float it may be infinite, and rounding it to pixels raises OverflowError).
MAX_COORDINATE = 100_000.0

_N = r"(-?\d+(?:\.\d+)?)"
_S = r"\s*[,\s]\s*"
_PAIR = rf"\(?\s*{_N}{_S}{_N}\s*\)?"
_BOX = rf"[\(\[]?\s*{_N}{_S}{_N}{_S}{_N}{_S}{_N}\s*[\)\]]?"
_MARKED = [
    re.compile(rf"<point>\s*{_PAIR}\s*</point>", re.IGNORECASE),
    re.compile(rf"<\|box_start\|>\s*{_BOX}\s*<\|box_end\|>"),
    re.compile(rf"<\|box_start\|>\s*{_PAIR}\s*<\|box_end\|>"),
    re.compile(rf"(?:start_box|point)\s*=\s*['\"]?\s*{_BOX}\s*['\"]?", re.IGNORECASE),
    re.compile(rf"(?:start_box|point)\s*=\s*['\"]?\s*{_PAIR}\s*['\"]?", re.IGNORECASE),
    re.compile(rf"\b(?:click|tap|move_?to|left_click)\s*\(\s*(?:x\s*=\s*)?{_N}\s*,\s*(?:y\s*=\s*)?{_N}\s*[,)]",
               re.IGNORECASE),
    re.compile(rf"\bx\"?\s*[:=]\s*{_N}\s*[,;]?\s*\"?y\"?\s*[:=]\s*{_N}", re.IGNORECASE),
]
_BRACKETED = [
    re.compile(rf"[\(\[]\s*{_N}{_S}{_N}{_S}{_N}{_S}{_N}\s*[\)\]]"),
    re.compile(rf"[\(\[]\s*{_N}\s*,\s*{_N}\s*[\)\]]"),
]
_BARE = re.compile(rf"(?<![\w.]){_N}\s*,\s*{_N}(?![\w.]*\d)")
_SIZE = re.compile(r"\b\d+(?:\.\d+)?\s*[x×X*]\s*\d+(?:\.\d+)?\b")
#: Gemini's own keys: always y first.
_YX_KEYS = ("box_2d", "point")


class PointReplyError(ValueError):
    """The reply names no point, several, or one outside the space; the message says which."""


def _num(text: str) -> float:
    """One coordinate; a `PointReplyError` when no screen could have it."""
    value = float(text)
    if abs(value) > MAX_COORDINATE:
        shown = text if len(text) <= 20 else f"{text[:12]}... ({len(text)} digits)"
        raise PointReplyError(f"the coordinate {shown} is far outside any screen")
    return value


def _point(nums: list[float]) -> tuple[float, float]:
    if len(nums) == 4:
        x1, y1, x2, y2 = nums
        if x2 < x1 or y2 < y1:
            raise PointReplyError(f"the box [{x1:g}, {y1:g}, {x2:g}, {y2:g}] has its corners the wrong way round; "
                                  "give [left, top, right, bottom] or one point x, y")
        return (x1 + x2) / 2, (y1 + y2) / 2
    return nums[0], nums[1]


def _numbers(found: Any, sizes: tuple[int, ...]) -> list[float] | None:
    if isinstance(found, list) and len(found) in sizes and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in found):
        return [_num(str(v)) for v in found]
    return None


def _json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects of `text`, those inside a top-level list (Gemini's answer) included."""
    out: list[dict[str, Any]] = []
    for chunk in json_chunks(text, "[") + json_chunks(text, "{"):
        if chunk.problem is not None:
            continue
        values = chunk.value if isinstance(chunk.value, list) else [chunk.value]
        out += [{key_name(k): v for k, v in v.items()} for v in values if isinstance(v, dict)]
    return out


def _json_point(text: str, order: PointOrder) -> list[tuple[float, float]]:
    found: list[tuple[float, float]] = []
    for value in _json_objects(text):
        if order == "yx":
            if (box := _numbers(value.get("box_2d"), (4,))) is not None:
                y1, x1, y2, x2 = box
                found.append(_point([x1, y1, x2, y2]))
            elif (pair := _numbers(value.get("point"), (2,))) is not None:
                found.append((pair[1], pair[0]))
            continue
        if "box_2d" in value:
            raise PointReplyError('"box_2d" is y-first in thousandths (Gemini\'s form), not the form asked; '
                                  "answer with one point x, y")
        for key in ("point", "coordinate", "coordinates", "bbox", "box"):
            if (nums := _numbers(value.get(key), (2, 4))) is not None:
                found.append(_point(nums))
                break
        else:
            x, y = value.get("x"), value.get("y")
            if isinstance(x, int | float) and isinstance(y, int | float) and not isinstance(x, bool) \
                    and not isinstance(y, bool):
                found.append((_num(str(x)), _num(str(y))))
    return found


def _found(text: str, order: PointOrder) -> list[tuple[float, float]]:
    """The points of the most explicit form the reply uses (possibly several)."""
    marked = _json_point(text, order)
    if order == "yx":
        return marked  # Gemini states points only in its JSON; a bare pair could be either way round
    for pattern in _MARKED:
        marked += [_point([_num(g) for g in m.groups()]) for m in pattern.finditer(text)]
    if marked:
        return marked
    bracketed: list[tuple[float, float]] = []
    rest = text
    for pattern in _BRACKETED:
        bracketed += [_point([_num(g) for g in m.groups()]) for m in pattern.finditer(rest)]
        rest = pattern.sub(" ", rest)
    if bracketed:
        return bracketed
    prose = _SIZE.sub(" ", text)
    return [(_num(a), _num(b)) for a, b in _BARE.findall(prose)]


def _form(order: PointOrder, w: float, h: float) -> str:
    if order == "yx":
        return '{"point": [y, x]} with y and x from 0 to 1000'
    return f"one point x, y (0 <= x <= {w:g}, 0 <= y <= {h:g})"


def read_point(text: str, space: tuple[float, float], *, convention: PointOrder = "xy") -> tuple[float, float]:
    """The one point `text` names, x first, in the model's units of a ``(width, height)``
    space; `convention` says how the model orders it (its profile's, see the module)."""
    w, h = space
    found = _found(strip_reasoning(text), convention)
    distinct = list(dict.fromkeys((round(x, 3), round(y, 3)) for x, y in found))
    if len(distinct) > 1:
        distinct = [p for p in distinct if p not in ((0, 0), (w, h))] or distinct
    if not distinct:
        raise PointReplyError(f"the reply names no point; answer with {_form(convention, w, h)}")
    if len(distinct) > 1:
        listed = "; ".join(f"({x:g}, {y:g})" for x, y in distinct[:4])
        raise PointReplyError(f"the reply names {len(distinct)} different points ({listed}); give exactly one")
    x, y = distinct[0]
    if w > 2 and h > 2 and 0 <= x < 1 and 0 <= y < 1 and (x % 1 or y % 1):
        raise PointReplyError(f"({x:g}, {y:g}) looks like fractions of the screen, but the answer is asked in "
                              f"units of a {w:g}x{h:g} space; answer with {_form(convention, w, h)}")
    if not (0 <= x <= w and 0 <= y <= h):
        raise PointReplyError(f"({x:g}, {y:g}) lies outside the {w:g}x{h:g} space; answer with 0 <= x <= {w:g} "
                              f"and 0 <= y <= {h:g}")
    return x, y
