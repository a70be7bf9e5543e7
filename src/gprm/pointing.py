"""The Point tool: ground a description to one spot and star it on the screenshot.

Two ways to ground: ask a pointing model, or match the description against the UI parser's
elements. Pointing models answer in different units, and all are read: Molmo's
`<point x="61.5" y="40.2">` (percent of width and height), Qwen's `{"point_2d": [x, y]}` and
`{"bbox_2d": [..]}` (pixels of the image sent), Gemini's `{"point": [y, x]}` and `box_2d` (y
first, thousandths; only from a model whose convention says so), and a bare `(x, y)`,
`x=.., y=..` or `{"x": .., "y": ..}` read in the coordinate space the prompt declared, never
guessed from the size of the numbers. A reply naming several different points (Molmo's
`<points x1=.. x2=..>`) is refused, never read as its first.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from core.replies import json_chunks, key_name, strip_reasoning
from gprm.elements import UIElement
from gprm.replies import ReplyError

__all__ = ["Convention", "PointAnswer", "match_element", "parse_point", "read_point", "text_match"]

#: The coordinate space a pointing prompt declares for plain pairs: percent, pixels of the
#: image sent, fractions, thousandths (x first), or Gemini's y-first thousandths.
Convention = Literal["percent", "pixels", "fraction", "norm1000", "yx1000"]

_NUM = r"-?\d+(?:\.\d+)?"
_MOLMO_TAG = re.compile(r"<points?\b[^>]*>", re.I)
_MOLMO_PAIR = re.compile(rf"""\bx(\d*)\s*=\s*["']?({_NUM})["']?\s+[^>]*?\by\1\s*=\s*["']?({_NUM})""", re.I | re.S)
_POINT_2D = re.compile(rf'''["']point_2d["']\s*:\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*\]''', re.I)
_BBOX_2D = re.compile(rf'''["']bbox_2d["']\s*:\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*\]''', re.I)
_PAIR = re.compile(rf"[\(\[]\s*({_NUM})\s*,\s*({_NUM})\s*[\)\]]")
_XY = re.compile(rf"\bx\s*[=:]\s*({_NUM})\s*[,;\s]\s*y\s*[=:]\s*({_NUM})", re.I)
#: A pointing model saying the element is absent (an answer, not an unreadable reply).
_NOT_FOUND = re.compile(r"\b(?:not\s+found|not\s+(?:visible|present|shown)|cannot\s+(?:find|locate|see)|"
                        r"can't\s+(?:find|locate|see)|could\s*n[o']t\s+(?:find|locate)|no\s+such|"
                        r"(?:does|do)\s+not\s+(?:appear|exist)|isn't\s+(?:visible|there|on)|"
                        r"is\s+not\s+(?:on|in)\s+the\s+(?:screen|image|screenshot))", re.I)


class PointAnswer(BaseModel):
    """A grounded point in screenshot pixels, and how it was read."""

    x: float
    y: float
    #: "molmo", "point_2d", "bbox_2d", "pair", "element"
    form: str
    convention: str


@dataclass(frozen=True, slots=True)
class _Raw:
    x: float
    y: float
    form: str
    convention: Convention


def _gemini(text: str) -> list[_Raw]:
    """Gemini's points: ``{"point": [y, x]}`` / ``{"box_2d": [ymin, xmin, ymax, xmax]}``, in a
    list or alone, thousandths."""
    found: list[_Raw] = []
    for chunk in json_chunks(text, "[") + json_chunks(text, "{"):
        if chunk.problem is not None:
            continue
        for value in chunk.value if isinstance(chunk.value, list) else [chunk.value]:
            if not isinstance(value, dict):
                continue
            lowered = {key_name(k): v for k, v in value.items()}
            box, point = lowered.get("box_2d"), lowered.get("point")
            if isinstance(box, list) and _numbers(box, 4):
                y1, x1, y2, x2 = (float(v) for v in box)
                if y2 < y1 or x2 < x1:
                    raise ReplyError("box_2d has its corners the wrong way round; give [ymin, xmin, ymax, xmax]")
                found.append(_Raw((x1 + x2) / 2, (y1 + y2) / 2, "box_2d", "yx1000"))
            elif isinstance(point, list) and _numbers(point, 2):
                found.append(_Raw(float(point[1]), float(point[0]), "point", "yx1000"))
    return found


def _numbers(value: object, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value)


def _found(text: str, declared: Convention) -> list[_Raw]:
    """Every point the reply states, in its most explicit forms; plain pairs only when it
    has none of those."""
    if declared == "yx1000":
        return list(dict.fromkeys(_gemini(text)))
    if re.search(r"""["']box_2d["']\s*:""", text):
        raise ReplyError('"box_2d" is y-first in thousandths (Gemini\'s form), not the form asked; answer '
                         f"{_FORMS[declared]}")
    marked: list[_Raw] = []
    for tag in _MOLMO_TAG.finditer(text):
        marked += [_Raw(float(m[2]), float(m[3]), "molmo", "percent") for m in _MOLMO_PAIR.finditer(tag[0])]
    marked += [_Raw(float(m[1]), float(m[2]), "point_2d", "pixels") for m in _POINT_2D.finditer(text)]
    marked += [_Raw((float(m[1]) + float(m[3])) / 2, (float(m[2]) + float(m[4])) / 2, "bbox_2d", "pixels")
               for m in _BBOX_2D.finditer(text)]
    if marked:
        return marked
    for chunk in json_chunks(text):
        if chunk.problem is not None or not isinstance(chunk.value, dict):
            continue
        lowered = {key_name(k): v for k, v in chunk.value.items()}
        x, y = lowered.get("x"), lowered.get("y")
        if isinstance(x, int | float) and isinstance(y, int | float) and not isinstance(x, bool) \
                and not isinstance(y, bool):
            marked.append(_Raw(float(x), float(y), "pair", declared))
    if marked:
        return marked
    pairs = [_Raw(float(m[1]), float(m[2]), "pair", declared) for m in _PAIR.finditer(text)]
    return pairs or [_Raw(float(m[1]), float(m[2]), "pair", declared) for m in _XY.finditer(text)]


def read_point(text: str, size: tuple[int, int], *, coordinates: Convention = "percent",
               sent_size: tuple[int, int] | None = None) -> PointAnswer | None:
    """The point in a pointing model's reply, in pixels of an image of `size`; None when the
    model says the element is not there. Raises `ReplyError` (the feedback for a re-ask)
    when the reply holds no point, several different ones, a point and "not found" at
    once, or a point outside the image.

    `coordinates` is the space the prompt declared for plain pairs; `sent_size` is the size
    of the image the model saw, when it was downscaled, so pixel answers are scaled back up.
    """
    text = strip_reasoning(text)
    found = list(dict.fromkeys(_found(text, coordinates)))
    absent = _NOT_FOUND.search(text) is not None
    if not found:
        if absent:
            return None
        raise ReplyError(f"the reply holds no point; answer {_FORMS[coordinates]} or: not found")
    if len(found) > 1:
        listed = "; ".join(f"({r.x:g}, {r.y:g})" for r in found[:4])
        raise ReplyError(f"the reply names {len(found)} different points ({listed}); answer with exactly one")
    if absent:
        raise ReplyError("the reply gives a point and also says the element is not there; answer with one of them")
    raw = found[0]
    width, height = size
    seen_w, seen_h = sent_size or size
    if raw.convention == "percent":
        bounds, (x, y) = (100.0, 100.0), (raw.x / 100 * width, raw.y / 100 * height)
    elif raw.convention in ("norm1000", "yx1000"):
        bounds, (x, y) = (1000.0, 1000.0), (raw.x / 1000 * width, raw.y / 1000 * height)
    elif raw.convention == "fraction":
        bounds, (x, y) = (1.0, 1.0), (raw.x * width, raw.y * height)
    else:
        bounds, (x, y) = (float(seen_w), float(seen_h)), (raw.x * width / seen_w, raw.y * height / seen_h)
    if not (0 <= raw.x <= bounds[0] and 0 <= raw.y <= bounds[1]):
        raise ReplyError(f"the point ({raw.x:g}, {raw.y:g}) lies outside the image in {raw.convention} "
                         f"(0–{bounds[0]:g}, 0–{bounds[1]:g}); answer {_FORMS[coordinates]} or: not found")
    return PointAnswer(x=min(x, width - 1), y=min(y, height - 1), form=raw.form, convention=raw.convention)


_FORMS: dict[Convention, str] = {
    "percent": '<point x="X" y="Y">label</point> with X and Y in percent (0–100) of the width and height',
    "pixels": "(X, Y) in pixels of the attached image",
    "fraction": "(X, Y) as fractions (0–1) of the width and height",
    "norm1000": "(X, Y) in thousandths (0–1000) of the width and height",
    "yx1000": '{"point": [Y, X]}, Y first, in thousandths (0–1000) of the height and width',
}


def parse_point(text: str, size: tuple[int, int], *, coordinates: Convention = "percent",
                sent_size: tuple[int, int] | None = None) -> PointAnswer | None:
    """`read_point`, with None for anything that is not a point on the image."""
    try:
        return read_point(text, size, coordinates=coordinates, sent_size=sent_size)
    except ReplyError:
        return None


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


#: Words of a description that name a kind of element, and the roles (tree roles, lower
#: case; OCR elements have none) each kind covers.
ROLE_WORDS: dict[str, frozenset[str]] = {
    "button": frozenset({"push-button", "toggle-button", "button", "imagebutton", "splitbutton", "push-button-menu",
                         "radio-button", "menu-button"}),
    "icon": frozenset({"icon", "image", "imageview", "imagebutton", "push-button", "button", "toggle-button"}),
    "field": frozenset({"entry", "text", "edittext", "password-text", "combo-box", "edit", "autocompletetextview",
                        "spin-button", "searchbox", "combobox"}),
    "menu": frozenset({"menu", "menu-item", "menuitem", "check-menu-item", "radio-menu-item"}),
    "tab": frozenset({"page-tab", "tab-item", "tabitem", "tab"}),
    "link": frozenset({"link", "hyperlink"}),
    "checkbox": frozenset({"check-box", "checkbox", "switch", "toggle-switch", "toggle-button", "check-menu-item"}),
    "item": frozenset({"list-item", "tree-item", "table-cell", "listitem", "treeitem", "dataitem", "menu-item"}),
    "label": frozenset({"label", "static", "textview", "heading", "paragraph", "text"}),
}
_ROLE_SYNONYMS = {
    "button": "button", "btn": "button", "icon": "icon", "logo": "icon", "image": "icon", "field": "field",
    "box": "field", "input": "field", "textbox": "field", "entry": "field", "searchbox": "field", "menu": "menu",
    "tab": "tab", "link": "link", "hyperlink": "link", "checkbox": "checkbox", "check": "checkbox",
    "toggle": "checkbox", "switch": "checkbox", "item": "item", "row": "item", "cell": "item", "option": "item",
    "label": "label", "heading": "label", "title": "label",
}
_FILLER = frozenset({"the", "a", "an", "on", "in", "at", "of", "to", "for", "labelled", "labeled", "named", "called",
                     "with", "that", "says", "reading", "text", "this", "element", "control", "which", "is",
                     "shows", "showing", "marked", "top", "bar", "area", "screen", "window", "panel"})
_ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "last": -1}
_RELATIONS = {"below": "below", "under": "below", "beneath": "below", "above": "above", "over": "above",
              "left": "left", "right": "right", "beside": "near", "next": "near", "near": "near"}


@dataclass(frozen=True, slots=True)
class _Description:
    label: str
    kinds: frozenset[str]
    ordinal: int | None
    relation: str | None
    anchor: str | None


_SLOT = "quotedlabel"


def _describe(description: str) -> _Description:
    quoted = [q.strip() for q in _QUOTED.findall(description)]
    # Each quoted label becomes one slot word, so its own words ("the 'Left' button") name
    # no relation, role or ordinal.
    counter = iter(range(len(quoted)))
    words = _norm(_QUOTED.sub(lambda _: f" {_SLOT}{next(counter)} ", description)).split()

    def text(ws: list[str]) -> tuple[str, list[str]]:
        """The label words of `ws`: a quoted label if there is one, else the plain words."""
        slots = [quoted[int(w[len(_SLOT):])] for w in ws if w.startswith(_SLOT)]
        plain = [w for w in ws if not w.startswith(_SLOT)]
        return (_norm(slots[0]) if slots else ""), plain

    relation, anchor = None, None
    for i, w in enumerate(words):
        if w in _RELATIONS and i > 0:
            rest = [x for x in words[i + 1:] if x not in ("of", "to", "the", "a", "an")]
            if rest:
                slots = [quoted[int(x[len(_SLOT):])] for x in rest if x.startswith(_SLOT)]
                # A quoted anchor stays quoted: "right of 'Menu'" names the element called Menu.
                relation = _RELATIONS[w]
                anchor = f"'{slots[0]}'" if slots else " ".join(rest)
                words = words[:i]
            break
    label, plain = text(words)
    kinds = frozenset(_ROLE_SYNONYMS[w.rstrip("s")] for w in plain if w.rstrip("s") in _ROLE_SYNONYMS)
    ordinal = next((_ORDINALS[w] for w in plain if w in _ORDINALS), None)
    if not label:
        label = " ".join(w for w in plain if w not in _FILLER and w.rstrip("s") not in _ROLE_SYNONYMS
                         and w not in _ORDINALS)
    return _Description(label, kinds, ordinal, relation, anchor)


def _name_score(label: str, name: str) -> float:
    if not label or not name:
        return 0.0
    if name == label:
        return 1.0
    lt, nt = label.split(), name.split()
    if all(t in nt for t in lt):
        return 0.75 + 0.2 * len(lt) / len(nt)
    if all(t in lt for t in nt):
        return 0.55 + 0.3 * len(nt) / len(lt)
    ratio = difflib.SequenceMatcher(None, label, name).ratio()
    return 0.85 * ratio if ratio >= 0.75 else 0.0


def _kind_fits(kinds: frozenset[str], element: UIElement) -> bool | None:
    """Whether the element is of a kind the description names; None when it cannot tell."""
    if not kinds:
        return None
    role = element.role.lower()
    if role:
        return any(role in ROLE_WORDS[k] for k in kinds)
    controls = kinds - {"label"}
    return element.interactivity if controls else None


def _ranked(d: _Description, elements: list[UIElement]) -> list[tuple[float, UIElement]]:
    out = []
    for e in elements:
        fits = _kind_fits(d.kinds, e)
        name = _name_score(d.label, _norm(e.content))
        if d.label and name == 0.0:
            continue
        if not d.label and not fits:
            continue
        score = (name if d.label else 0.6) + (0.15 if fits else -0.15 if fits is False else 0.0)
        if e.interactivity and d.kinds - {"label"}:
            score += 0.05
        out.append((score, e))
    return sorted(out, key=lambda se: -se[0])


def _aligned(relation: str, e: UIElement, anchor: UIElement) -> bool:
    """Whether `e` shares the anchor's row, for left and right (above and below go by
    distance: list rows rarely share a column with the element named)."""
    if relation in ("left", "right"):
        return not (e.box[3] <= anchor.box[1] or e.box[1] >= anchor.box[3])
    return True


def _direction_ok(relation: str, e: UIElement, anchor: UIElement) -> bool:
    if e.box[0] <= anchor.box[0] and e.box[1] <= anchor.box[1] and e.box[2] >= anchor.box[2] \
            and e.box[3] >= anchor.box[3]:
        return False  # a container of the anchor is not beside it
    ex, ey = e.centre
    if relation == "below":
        return ey > anchor.box[3] - 2
    if relation == "above":
        return ey < anchor.box[1] + 2
    if relation == "left":
        return ex < anchor.box[0] + 2
    if relation == "right":
        return ex > anchor.box[2] - 2
    return True


def match_element(description: str, elements: list[UIElement], *, threshold: float = 0.6) -> UIElement | None:
    """The element a description names, by its name (the quoted label, or the words left
    when role words and filler are taken out: "Save button", "Phone icon", "Icon 'Gmail'"),
    the role it names (a button, field, tab, ...), an ordinal ("the second tab") and a
    relation to another element ("the field below 'Name'"); None when nothing fits."""
    d = _describe(description)
    if not d.relation and d.ordinal is None:
        # A description that is exactly one element's name ("Menu", "Hyperlink", "Chart...")
        # means that element, even when its words are also role words.
        raw = " ".join(description.casefold().split()).strip(" '\"")
        exact = [e for e in elements if raw and " ".join(e.content.casefold().split()) == raw]
        if len(exact) == 1:
            return exact[0]
    if not d.label and not d.kinds:
        return None
    ranked = [(s, e) for s, e in _ranked(d, elements) if s >= threshold]
    if d.relation and d.anchor:
        anchors = [e for s, e in _ranked(_describe(d.anchor), elements) if s >= threshold]
        if anchors:
            anchor = anchors[0]
            placed = [(s, e) for s, e in ranked if e.id != anchor.id and _direction_ok(d.relation, e, anchor)]
            if not placed and not d.kinds:  # "the contact below 'Alice'": the nearest named element there
                placed = [(threshold, e) for e in elements if e.content and _norm(e.content) != _norm(anchor.content)
                          and _direction_ok(d.relation, e, anchor)]
            ranked = [(s, e) for s, e in placed if _aligned(d.relation, e, anchor)] or placed
            ax, ay = anchor.centre
            ranked.sort(key=lambda se: (-round(se[0], 1), abs(se[1].centre[0] - ax) + abs(se[1].centre[1] - ay)))
    if not ranked:
        return None
    if d.ordinal is not None:
        top = ranked[0][0]
        tied = sorted((e for s, e in ranked if s >= top - 0.05), key=lambda e: (e.box[1], e.box[0]))
        if d.ordinal < len(tied):
            return tied[d.ordinal]
        return None
    return ranked[0][1]
